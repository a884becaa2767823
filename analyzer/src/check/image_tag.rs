//! `image-tag` (warning): a container image without a tag, or tagged `latest`.
//!
//! Such an image changes under the same manifest: two applies of one commit can run
//! different code, and a rollback does not roll back. Pin a version tag or a digest.
//!
//! ```yaml
//! components:
//!   - name: web
//!     type: webservice
//!     properties:
//!       image: nginx          # warning: no tag; use nginx:1.27 or nginx@sha256:...
//! ```

use super::AppContext;
use super::pod_spec::PodTemplate;
use crate::{Diagnostic, RenderedObject};

pub(crate) fn check(
    ctx: &AppContext<'_>,
    object: &RenderedObject,
    pod: &PodTemplate<'_>,
    out: &mut Vec<Diagnostic>,
) {
    for container in &pod.spec.containers {
        let Some(image) = container.image else {
            continue;
        };
        let problem = match image_tag(image) {
            ImageTag::Digest => continue,
            ImageTag::Tag("latest") => "is tagged `latest`",
            ImageTag::Tag(_) => continue,
            ImageTag::Missing => "has no tag",
        };
        out.push(ctx.at_object(
            object,
            Diagnostic::warning(
                "image-tag",
                format!(
                    "{}: image `{image}` of {} {problem}; pin a version or a digest",
                    super::object_label(&object.object),
                    container.label()
                ),
                Some(ctx.source_span(
                    object,
                    &format!("{}/image", pod.container_pointer(container)),
                    Some("image"),
                )),
            ),
        ));
    }
}

#[derive(Debug, PartialEq, Eq)]
enum ImageTag<'a> {
    Digest,
    Tag(&'a str),
    Missing,
}

/// The tag of an image reference: after the last `:` of the last path segment (a `:` before
/// the last `/` is a registry port).
fn image_tag(image: &str) -> ImageTag<'_> {
    if image.contains('@') {
        return ImageTag::Digest;
    }
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    match last_segment.rsplit_once(':') {
        Some((_, tag)) if !tag.is_empty() => ImageTag::Tag(tag),
        _ => ImageTag::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_ports_and_digests() {
        assert_eq!(image_tag("nginx"), ImageTag::Missing);
        assert_eq!(image_tag("nginx:1.27"), ImageTag::Tag("1.27"));
        assert_eq!(image_tag("localhost:5000/nginx"), ImageTag::Missing);
        assert_eq!(
            image_tag("localhost:5000/nginx:latest"),
            ImageTag::Tag("latest")
        );
        assert_eq!(image_tag("nginx@sha256:abc"), ImageTag::Digest);
    }
}
