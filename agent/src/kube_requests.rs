//! Kubernetes API requests by cluster, verb and HTTP code, counted by a tower layer on the
//! kube client (`driftless_kube_requests_total`), so every request is seen: reads, writes,
//! discovery and watches alike.
//!
//! The verb is Kubernetes' own (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
//! `deletecollection`), read off the method and path the way the apiserver's request info
//! does; paths outside the resource API (`/version`, discovery) count as `get`. The code is the
//! response status, or `error` when no response came. Labels are bounded: clusters come from
//! the config, verbs and codes from small fixed sets.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The counter family, shared by every client that counts into it; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct KubeRequests {
    family: Family<KubeRequestLabels, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KubeRequestLabels {
    cluster: String,
    verb: &'static str,
    code: String,
}

impl KubeRequests {
    pub(crate) fn family(&self) -> Family<KubeRequestLabels, Counter> {
        self.family.clone()
    }

    /// The layer that counts the requests of the client of `cluster`.
    pub fn layer(&self, cluster: &str) -> CountRequestsLayer {
        CountRequestsLayer {
            requests: self.clone(),
            cluster: cluster.to_owned(),
        }
    }

    fn record(&self, cluster: &str, verb: &'static str, code: String) {
        self.family
            .get_or_create(&KubeRequestLabels {
                cluster: cluster.to_owned(),
                verb,
                code,
            })
            .inc();
    }
}

/// The Kubernetes verb of a request.
pub fn verb(method: &http::Method, path: &str, query: Option<&str>) -> &'static str {
    let watching = query.is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let segments: Vec<&str> = path.split('/').filter(|part| !part.is_empty()).collect();
    // `/api/v1/...` or `/apis/<group>/<version>/...`; anything else is not a resource.
    let rest = match segments.first() {
        Some(&"api") if segments.len() >= 2 => &segments[2..],
        Some(&"apis") if segments.len() >= 3 => &segments[3..],
        _ => &[][..],
    };
    // `namespaces/<ns>/<resource>...` names a namespaced resource; `namespaces[/<name>]`
    // alone is the Namespace resource itself.
    let rest = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        &rest[2..]
    } else {
        rest
    };
    let collection = rest.len() == 1;
    match *method {
        _ if rest.is_empty() => "get",
        http::Method::GET if watching => "watch",
        http::Method::GET if collection => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if collection => "deletecollection",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

/// Counts each request of the wrapped client.
#[derive(Debug, Clone)]
pub struct CountRequestsLayer {
    requests: KubeRequests,
    cluster: String,
}

impl<S> tower::Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> CountRequests<S> {
        CountRequests {
            inner,
            requests: self.requests.clone(),
            cluster: self.cluster.clone(),
        }
    }
}

/// The counting service.
#[derive(Debug, Clone)]
pub struct CountRequests<S> {
    inner: S,
    requests: KubeRequests,
    cluster: String,
}

impl<S, B, R> tower::Service<http::Request<B>> for CountRequests<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let verb = verb(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        );
        let (requests, cluster) = (self.requests.clone(), self.cluster.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "error".to_owned(),
            };
            requests.record(&cluster, verb, code);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_are_read_as_the_apiserver_reads_them() {
        let cases = [
            ("GET", "/api/v1/namespaces/team-a/configmaps", None, "list"),
            (
                "GET",
                "/api/v1/namespaces/team-a/configmaps",
                Some("watch=true&resourceVersion=5"),
                "watch",
            ),
            (
                "GET",
                "/api/v1/namespaces/team-a/configmaps/web",
                None,
                "get",
            ),
            ("GET", "/api/v1/namespaces", None, "list"),
            ("GET", "/api/v1/namespaces/team-a", None, "get"),
            (
                "GET",
                "/apis/apps/v1/deployments",
                Some("limit=500"),
                "list",
            ),
            (
                "PATCH",
                "/apis/apps/v1/namespaces/a/deployments/web",
                Some("fieldManager=driftless"),
                "patch",
            ),
            (
                "POST",
                "/apis/apps/v1/namespaces/a/deployments",
                None,
                "create",
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/configmaps/tracker",
                None,
                "update",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/configmaps/web",
                None,
                "delete",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/configmaps",
                None,
                "deletecollection",
            ),
            ("GET", "/apis/apps/v1", None, "get"),
            ("GET", "/version", None, "get"),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                None,
                "create",
            ),
        ];
        for (method, path, query, expected) in cases {
            let method: http::Method = method.parse().unwrap();
            assert_eq!(
                verb(&method, path, query),
                expected,
                "{method} {path} {query:?}"
            );
        }
    }
}
