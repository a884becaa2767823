// Command faultproxy is an HTTPS reverse proxy in front of a kube-apiserver that answers a share
// of the requests with an HTTP error instead of forwarding them. A TCP fault proxy such as
// Toxiproxy cannot forge HTTP answers inside TLS; this one terminates TLS, so the chaos trials
// (tests/e2e/chaos) can put 5xx answers between the agent and the apiserver.
//
// It serves TLS with a certificate it makes at start (written as PEM to -serving-ca-out, for the
// client's kubeconfig) and reaches the apiserver with the client certificate it is given. An
// admin endpoint on plain HTTP sets and lifts the fault:
//
//	PUT    /fault?status=503&ratio=0.5   answer half the requests with 503 from now on
//	DELETE /fault                        forward everything again
//	GET    /stats                        {"forwarded": N, "injected": M}
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type fault struct {
	mu     sync.Mutex
	status int
	ratio  float64
}

func (f *fault) pick() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status != 0 && mrand.Float64() < f.ratio {
		return f.status
	}
	return 0
}

func (f *fault) set(status int, ratio float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.ratio = status, ratio
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "where the apiserver's clients connect (TLS)")
	admin := flag.String("admin", "127.0.0.1:0", "the admin endpoint (plain HTTP)")
	upstream := flag.String("upstream", "", "the apiserver, https://host:port")
	caFile := flag.String("ca", "", "the apiserver's CA (PEM)")
	certFile := flag.String("cert", "", "the client certificate to present to the apiserver (PEM)")
	keyFile := flag.String("key", "", "its key (PEM)")
	servingCAOut := flag.String("serving-ca-out", "", "where to write the proxy's own certificate (PEM)")
	flag.Parse()
	if *upstream == "" || *caFile == "" || *certFile == "" || *keyFile == "" || *servingCAOut == "" {
		log.Fatal("faultproxy: -upstream, -ca, -cert, -key and -serving-ca-out are required")
	}
	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatalf("faultproxy: -upstream: %v", err)
	}
	clientCert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatalf("faultproxy: client certificate: %v", err)
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatalf("faultproxy: -ca: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		log.Fatal("faultproxy: -ca holds no certificate")
	}
	serving, servingPEM, err := selfSigned()
	if err != nil {
		log.Fatalf("faultproxy: serving certificate: %v", err)
	}
	if err := os.WriteFile(*servingCAOut, servingPEM, 0o600); err != nil {
		log.Fatalf("faultproxy: -serving-ca-out: %v", err)
	}

	var forwarded, injected atomic.Int64
	current := &fault{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
	}
	// Watches stream: pass every event on as it comes.
	proxy.FlushInterval = -1
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status := current.pick(); status != 0 {
			injected.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"kind": "Status", "apiVersion": "v1", "status": "Failure",
				"message": "injected by faultproxy", "reason": http.StatusText(status), "code": status,
			})
			return
		}
		forwarded.Add(1)
		proxy.ServeHTTP(w, r)
	})

	adminMux := http.NewServeMux()
	adminMux.HandleFunc("/fault", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			status, err1 := strconv.Atoi(r.URL.Query().Get("status"))
			ratio, err2 := strconv.ParseFloat(r.URL.Query().Get("ratio"), 64)
			if err1 != nil || err2 != nil || status < 400 || status > 599 || ratio < 0 || ratio > 1 {
				http.Error(w, "want ?status=400..599&ratio=0..1", http.StatusBadRequest)
				return
			}
			current.set(status, ratio)
		case http.MethodDelete:
			current.set(0, 0)
		default:
			http.Error(w, "PUT or DELETE", http.StatusMethodNotAllowed)
		}
	})
	adminMux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]int64{"forwarded": forwarded.Load(), "injected": injected.Load()})
	})

	adminListener, err := net.Listen("tcp", *admin)
	if err != nil {
		log.Fatalf("faultproxy: -admin: %v", err)
	}
	listener, err := tls.Listen("tcp", *listen, &tls.Config{Certificates: []tls.Certificate{serving}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		log.Fatalf("faultproxy: -listen: %v", err)
	}
	fmt.Printf("listen %s admin %s\n", listener.Addr(), adminListener.Addr())
	go func() { log.Fatal(http.Serve(adminListener, adminMux)) }()
	log.Fatal(http.Serve(listener, handler))
}

// selfSigned makes a CA and a certificate it signs for 127.0.0.1 and localhost (rustls refuses
// a CA certificate used as the server's own), and returns the latter with the CA as PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "faultproxy CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "faultproxy"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certificate := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return certificate, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
