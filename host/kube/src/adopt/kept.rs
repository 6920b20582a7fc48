//! The queue's pods grouped into adopted jobs, kept from one look to the next: the
//! grouping is made again only once a reflector applied an event to one of the
//! adoption's stores since it was made ([`Adoption::generation`]), so the leader's pass
//! and the snapshot of a quiet cluster do not walk every adopted pod each time. The
//! generation is read before the stores are, so a change that lands while the grouping
//! is made leaves it marked older, and the next look makes it again. It keeps what it
//! read; it must not write, nor decide what a grouping holds (that is `group`'s).

use std::sync::Arc;

use super::caches::Adoption;
use super::group::Grouped;

impl Adoption {
    /// The queue's pods grouped into adopted jobs (finished owners left out), and the
    /// gated pods no enabled kind owns: the kept grouping while the stores have not
    /// changed since it was made, else a new one, kept.
    pub(crate) fn group(&self) -> Arc<Grouped> {
        let generation = self.generation();
        // Held while grouping: the pass and the snapshot, on two threads, group once.
        let mut kept = self.kept.lock().expect("kept grouping lock");
        if let Some((made_at, grouped)) = kept.as_ref()
            && *made_at == generation
            && let Ok(grouped) = Arc::clone(grouped).downcast::<Grouped>()
        {
            return grouped;
        }
        let grouped = Arc::new(self.regroup());
        *kept = Some((generation, Arc::clone(&grouped) as _));
        grouped
    }
}
