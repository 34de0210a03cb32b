//! `Registry`: the session's subscriptions in a slab, so looking one up from a wire id is an
//! index, not a hash probe — EVENT dispatch costs the same with 10 or 10 000 subscriptions.

use crate::nostr::subscription::{Subscription, SubscriptionId};

/// Slots reused through a free list; a slot's generation goes into the id, so an id (and the
/// wire ids derived from it) of a removed subscription never matches the slot's next tenant.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    sub: Option<Subscription>,
}

impl Registry {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Store the subscription `make` builds for its new id.
    pub(crate) fn insert(
        &mut self,
        make: impl FnOnce(SubscriptionId) -> Subscription,
    ) -> SubscriptionId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                // Grown by a quarter, not doubled: a slot is a whole subscription, and
                // thousands of sessions each holding half their slots empty add up.
                if self.slots.len() == self.slots.capacity() {
                    self.slots.reserve_exact((self.slots.len() / 4).max(4));
                }
                self.slots.push(Slot {
                    generation: 0,
                    sub: None,
                });
                // The session bounds the registry (`max_registered`) far below u32::MAX.
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let slot = &mut self.slots[index as usize];
        let id = compose(slot.generation, index);
        slot.sub = Some(make(id));
        self.len += 1;
        id
    }

    pub(crate) fn get(&self, id: SubscriptionId) -> Option<&Subscription> {
        let (generation, index) = split(id);
        let slot = self.slots.get(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        slot.sub.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: SubscriptionId) -> Option<&mut Subscription> {
        let (generation, index) = split(id);
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        slot.sub.as_mut()
    }

    pub(crate) fn remove(&mut self, id: SubscriptionId) -> Option<Subscription> {
        let (generation, index) = split(id);
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let sub = slot.sub.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.len -= 1;
        Some(sub)
    }

    /// Each slot's generation, for a checkpoint.
    pub(crate) fn generations(&self) -> Vec<u32> {
        self.slots.iter().map(|s| s.generation).collect()
    }

    /// A registry from a checkpoint: slots with these generations, holding `subs` where
    /// their ids say.
    ///
    /// # Errors
    /// A description when an id names no slot, another generation, or a slot taken twice.
    pub(crate) fn restore(
        generations: &[u32],
        subs: Vec<Subscription>,
    ) -> Result<Registry, String> {
        let mut registry = Registry {
            slots: generations
                .iter()
                .map(|&generation| Slot {
                    generation,
                    sub: None,
                })
                .collect(),
            free: Vec::new(),
            len: 0,
        };
        for sub in subs {
            let (generation, index) = split(sub.id);
            let Some(slot) = registry.slots.get_mut(index as usize) else {
                return Err(format!("{}: no such slot", sub.id));
            };
            if slot.generation != generation || slot.sub.is_some() {
                return Err(format!("{}: not its slot's tenant", sub.id));
            }
            slot.sub = Some(sub);
            registry.len += 1;
        }
        // Lowest slot first, as a fresh registry would fill them.
        registry.free = (0..registry.slots.len())
            .rev()
            .filter(|&i| registry.slots[i].sub.is_none())
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        Ok(registry)
    }

    /// Every subscription, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Subscription> {
        self.slots.iter().filter_map(|s| s.sub.as_ref())
    }

    /// Every subscription, in slot order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Subscription> {
        self.slots.iter_mut().filter_map(|s| s.sub.as_mut())
    }
}

fn compose(generation: u32, index: u32) -> SubscriptionId {
    SubscriptionId((u64::from(generation) << 32) | u64::from(index))
}

fn split(id: SubscriptionId) -> (u32, u32) {
    ((id.0 >> 32) as u32, id.0 as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nostr::subscription::Priority;

    #[test]
    fn removed_ids_never_match_the_slots_next_tenant() {
        let mut r = Registry::default();
        let a = r.insert(|id| Subscription::new(id, &[], Priority::NORMAL, 0));
        let b = r.insert(|id| Subscription::new(id, &[], Priority::NORMAL, 0));
        assert_eq!((a, b), (SubscriptionId(0), SubscriptionId(1)));
        assert!(r.remove(a).is_some());
        assert!(r.remove(a).is_none());
        let c = r.insert(|id| Subscription::new(id, &[], Priority::NORMAL, 0));
        assert_eq!(c, SubscriptionId(1 << 32));
        assert!(r.get(a).is_none());
        assert_eq!(r.get(c).map(|s| s.id), Some(c));
        assert_eq!(r.len(), 2);
        assert_eq!(r.iter().map(|s| s.id).collect::<Vec<_>>(), vec![c, b]);
    }
}
