module driftless.dev/hack/faultproxy

go 1.22
