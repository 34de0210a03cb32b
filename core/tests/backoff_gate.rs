//! Property tests for `Backoff` and `RateLimitGate`.

use std::time::Duration;

use proptest::prelude::*;
use tether_core::{Backoff, BackoffPolicy, Instant, Jitter, RateLimitGate, Rng};

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        (0.0f64..=1.5).prop_map(Jitter::Proportional),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        Just(Jitter::Decorrelated),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        (0u64..=3_600_000).prop_map(Duration::from_millis),
        any::<u64>().prop_map(Duration::from_secs),
    ]
}

fn policy() -> impl Strategy<Value = BackoffPolicy> {
    (
        duration(),
        prop_oneof![Just(f64::NAN), Just(f64::MAX), -2.0f64..10.0],
        duration(),
        jitter(),
    )
        .prop_map(|(base, factor, cap, jitter)| BackoffPolicy {
            base,
            factor,
            cap,
            max_attempts: None,
            jitter,
        })
}

proptest! {
    #[test]
    fn delays_stay_within_documented_bounds(p in policy(), attempts in 0u32..=10_000, seed: u64) {
        let mut b = Backoff::new(p);
        let mut rng = Rng::new(seed);
        // Jump close to the requested attempt cheaply, then check a few around it.
        for _ in 0..attempts.saturating_sub(3) { b.next_delay(&mut rng); }
        for _ in 0..3 {
            let d = b.next_delay(&mut rng).unwrap();
            let n = b.attempts();
            prop_assert!(d <= p.max_delay(), "{d:?} > max {:?}", p.max_delay());
            if !matches!(p.jitter, Jitter::Decorrelated) {
                if !matches!(p.jitter, Jitter::Proportional(_)) {
                    prop_assert!(d <= p.ceiling(n), "{d:?} above ceiling {:?}", p.ceiling(n));
                }
                prop_assert!(d >= p.min_delay(n).min(p.ceiling(n)), "{d:?} < min {:?}", p.min_delay(n));
            }
        }
    }

    #[test]
    fn ceilings_grow_until_the_cap(base_ms in 1u64..5_000, factor in 1.1f64..4.0, cap_ms in 1u64..600_000) {
        let p = BackoffPolicy { base: Duration::from_millis(base_ms), factor, cap: Duration::from_millis(cap_ms), max_attempts: None, jitter: Jitter::None };
        let mut prev = Duration::ZERO;
        for n in 1..200 {
            let c = p.ceiling(n);
            prop_assert!(c >= prev, "ceiling shrank at {n}");
            prop_assert!(c <= p.cap);
            prev = c;
        }
        prop_assert_eq!(p.ceiling(199), p.cap);
        prop_assert_eq!(p.ceiling(1), p.base.min(p.cap));
    }

    #[test]
    fn reset_starts_over(steps in 1usize..50, seed: u64) {
        let mut b = Backoff::reconnect();
        let mut rng = Rng::new(seed);
        for _ in 0..steps { b.next_delay(&mut rng); }
        b.reset();
        prop_assert_eq!(b.attempts(), 0);
        let d = b.next_delay(&mut rng).unwrap();
        prop_assert!(d >= Duration::from_millis(500) && d <= Duration::from_millis(1500));
    }

    #[test]
    fn gate_until_is_monotone_capped_and_never_released_early(
        ops in proptest::collection::vec((0u64..20_000, proptest::option::of(0u64..1_000), any::<bool>(), prop::bool::weighted(0.05)), 1..60)
    ) {
        let mut g = RateLimitGate::default();
        let mut now = Instant::ZERO;
        let mut last_until: Option<Instant> = None;
        for (step_ms, hint, refuse, reset) in ops {
            now = now + Duration::from_millis(step_ms);
            if reset {
                g.reset();
                last_until = None;
                prop_assert!(!g.is_open(now));
                continue;
            }
            if !refuse { continue; }
            let until = g.refuse(now, hint.map(Duration::from_secs));
            prop_assert!(until <= now + Duration::from_secs(300));
            if let Some(prev) = last_until {
                prop_assert!(until >= prev, "window shrank");
            }
            let wanted = match hint { Some(h) if h > 0 => Duration::from_secs(h.min(300)), _ => Duration::from_secs(10) };
            prop_assert!(until >= now + wanted, "released before the refusal's own window");
            last_until = Some(until);
        }
    }
}

#[test]
fn jitter_at_the_cap_still_spreads() {
    // tower's lockstep bug: once capped, every client waited exactly the cap.
    for jitter in [
        Jitter::Proportional(0.2),
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ] {
        let p = BackoffPolicy {
            jitter,
            ..BackoffPolicy::reconnect()
        };
        let mut rng = Rng::new(5);
        let mut b = Backoff::new(p);
        for _ in 0..10_000 {
            b.next_delay(&mut rng);
        }
        let samples: Vec<Duration> = (0..50).map(|_| b.next_delay(&mut rng).unwrap()).collect();
        let min = samples.iter().min().unwrap();
        let max = samples.iter().max().unwrap();
        assert!(
            *max - *min > Duration::from_secs(1),
            "{jitter:?}: {min:?}..{max:?}"
        );
        assert!(!max.is_zero(), "{jitter:?} collapsed to zero at the cap");
    }
}
