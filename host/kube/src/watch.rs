//! The one loop that keeps a reflector's store filled: a kube-runtime watcher, each
//! object trimmed before it is stored ([`crate::trim`]), restarted with back-off when the
//! API server drops it, each event noted and signalled. The caches ([`crate::observe`])
//! and the adoption's reflectors start theirs through it. It watches; it must not write
//! to the cluster.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;

/// Keeps `writer`'s store filled from a watch on `api` (the crate's `reflect`, and the
/// adoption's reflectors), each object trimmed by `trim`, each event handed to `note` once
/// the store applied it (to mark what changed, `crate::changes`) and signalled on
/// `changed`. The watch restarts on its own with back-off.
pub(crate) fn reflect_into<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
    changed: Arc<Notify>,
    note: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let stream = watcher(api, config)
        .modify(trim)
        .default_backoff()
        .reflect(writer);
    async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            match stream.next().await {
                Some(Ok(event)) => {
                    note(&event);
                    changed.notify_one();
                }
                // The watcher retries on its own with back-off; the error is only news.
                Some(Err(error)) => tracing::warn!(%error, "watch failed; retrying with back-off"),
                None => break,
            }
        }
    }
}
