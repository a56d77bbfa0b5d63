//! Seeded fault schedules: each seed draws a size (2..=16), the operations, latencies,
//! notice delays and crash times of its scenario family.

use std::time::Duration;

use super::check::Failure;
use super::rng::Rng;
use super::{Crash, CrashWhen, OpKind, Outcome, Params, Sim};
use crate::{Config, Rank};

/// Families of schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// No crash: also checks the exact message count.
    FaultFree,
    /// Processes crash before the operations; notices may reach some survivors late.
    CrashBefore,
    /// Processes crash at random times while the operations run.
    CrashDuring,
    /// The coordinator, then its successors, crash in the middle of their sends.
    Coordinator,
    /// Several processes crash at the same instant, the coordinator among them.
    Simultaneous,
    /// The revoke initiator crashes in the middle of its flood; other crashes around it.
    RevokeFlood,
    /// Crashes after the operations (late notices, nothing left to decide).
    CrashAfter,
    /// Everything at once: non-blocking operations, many crashes, revokes, acks.
    Chaos,
    /// Lost messages between live processes, recovered by re-sends; crashes too.
    Lossy,
    /// Live processes are reported failed to some members and killed a little later
    /// (suspicions acted on before the kill completes).
    FalseSuspicion,
}

impl Scenario {
    /// All families.
    pub const ALL: [Scenario; 10] = [
        Scenario::FaultFree,
        Scenario::CrashBefore,
        Scenario::CrashDuring,
        Scenario::Coordinator,
        Scenario::Simultaneous,
        Scenario::RevokeFlood,
        Scenario::CrashAfter,
        Scenario::Chaos,
        Scenario::Lossy,
        Scenario::FalseSuspicion,
    ];

    fn salt(self) -> u64 {
        (self as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn us(x: u64) -> Duration {
    Duration::from_micros(x)
}

/// Distinct random ranks, at most `n − 1` (one process always survives).
fn victims(rng: &mut Rng, n: u32, k: u32) -> Vec<Rank> {
    let mut all: Vec<Rank> = (0..n).collect();
    for i in (1..all.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    all.truncate(k.min(n - 1) as usize);
    all
}

/// Draws the parameters of one run.
pub fn params(s: Scenario, seed: u64) -> Params {
    let mut rng = Rng::new(seed ^ s.salt());
    let n = rng.range(2, 16) as u32;
    let k_ops = rng.range(1, 5) as usize;
    let ops: Vec<OpKind> = (0..k_ops)
        .map(|_| {
            if rng.chance(600) {
                OpKind::Agree
            } else {
                OpKind::Shrink
            }
        })
        .collect();
    // Reordering: a wide delay range per seed.
    let max_delay = us(rng.range(5, 100));
    let min_delay = us(1).min(max_delay);
    let notice_max = us(rng.range(1, 600));
    let think_max = us(rng.range(0, 200));
    let spread = us(rng.range(0, 300));
    let mut p = Params {
        n,
        cfg: Config {
            max_outstanding: rng.range(1, 4) as u32,
            resend_interval: None,
        },
        ops,
        nonblocking: rng.chance(300),
        delay: (min_delay, max_delay),
        notice: (Duration::ZERO, notice_max),
        think: (Duration::ZERO, think_max),
        spread,
        crashes: Vec::new(),
        revokes: Vec::new(),
        ack_pm: rng.range(0, 800),
        loss_pm: 0,
        lost_from_dead_pm: rng.range(0, 1000),
        check_bound: true,
    };
    // Rough length of the operation phase, to place crashes inside it.
    let span = spread + (max_delay * 5 + think_max) * k_ops as u32;
    let at = |rng: &mut Rng, lo: Duration, hi: Duration| rng.duration(lo, hi.max(lo));
    match s {
        Scenario::FaultFree => {}
        Scenario::CrashBefore => {
            let k = rng.range(1, n as u64 - 1) as u32;
            for who in victims(&mut rng, n, k) {
                let t = at(&mut rng, Duration::ZERO, spread / 2);
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::At(t),
                });
            }
        }
        Scenario::CrashDuring => {
            let k = rng.range(1, n as u64 - 1) as u32;
            for who in victims(&mut rng, n, k) {
                let t = at(&mut rng, Duration::ZERO, span);
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::At(t),
                });
            }
        }
        Scenario::Coordinator => {
            // Ranks 0, 1, ... in turn, each armed to die within its next few sends.
            let k = rng.range(1, (n as u64 - 1).min(4)) as u32;
            let mut from = at(&mut rng, Duration::ZERO, span / 2);
            for who in 0..k {
                let sends = rng.below(3 * n as u64) as u32;
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::AfterSends {
                        from,
                        sends,
                        deadline: from + span,
                    },
                });
                from += at(&mut rng, Duration::ZERO, max_delay * 4);
            }
        }
        Scenario::Simultaneous => {
            let k = rng.range(2.min(n as u64 - 1), n as u64 - 1) as u32;
            let t = at(&mut rng, Duration::ZERO, span);
            let mut vs = victims(&mut rng, n, k);
            if !vs.contains(&0) && rng.chance(600) {
                vs[0] = 0;
            }
            for who in vs {
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::At(t),
                });
            }
        }
        Scenario::RevokeFlood => {
            let k = rng.range(1, n as u64 - 1) as u32;
            let vs = victims(&mut rng, n, k);
            let initiator = vs[0];
            let t = at(&mut rng, Duration::ZERO, span);
            p.revokes.push((t, initiator));
            p.crashes.push(Crash {
                who: initiator,
                when: CrashWhen::AfterSends {
                    from: t,
                    sends: rng.below(n as u64) as u32,
                    deadline: t + span,
                },
            });
            // Others crash around the flood (some mid-forward).
            for &who in &vs[1..] {
                let from = at(&mut rng, t, t + max_delay * 2);
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::AfterSends {
                        from,
                        sends: rng.below(n as u64) as u32,
                        deadline: from + span,
                    },
                });
            }
            // Sometimes a survivor revokes too, concurrently.
            if rng.chance(300) {
                let who = rng.below(n as u64) as Rank;
                p.revokes.push((at(&mut rng, t, t + max_delay * 3), who));
            }
        }
        Scenario::CrashAfter => {
            let k = rng.range(1, n as u64 - 1) as u32;
            for who in victims(&mut rng, n, k) {
                let t = at(&mut rng, span, span * 3);
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::At(t),
                });
            }
        }
        Scenario::FalseSuspicion => {
            let k = rng.range(1, (n as u64 - 1).min(3)) as u32;
            let mut vs = victims(&mut rng, n, k);
            if !vs.contains(&0) && rng.chance(500) {
                // The coordinator is the most interesting one to suspect.
                vs[0] = 0;
            }
            for who in vs {
                let t = at(&mut rng, Duration::ZERO, span);
                let kill_after = at(&mut rng, Duration::ZERO, max_delay * 8);
                p.crashes.push(Crash {
                    who,
                    when: CrashWhen::Suspected { at: t, kill_after },
                });
            }
        }
        Scenario::Chaos | Scenario::Lossy => {
            p.nonblocking = rng.chance(500);
            let k = rng.range(0, n as u64 - 1) as u32;
            for who in victims(&mut rng, n, k) {
                let from = at(&mut rng, Duration::ZERO, span);
                let when = if rng.chance(500) {
                    CrashWhen::At(from)
                } else {
                    CrashWhen::AfterSends {
                        from,
                        sends: rng.below(2 * n as u64) as u32,
                        deadline: from + span,
                    }
                };
                p.crashes.push(Crash { who, when });
            }
            if s == Scenario::Chaos {
                for _ in 0..rng.range(0, 3) {
                    let t = at(&mut rng, Duration::ZERO, span);
                    p.revokes.push((t, rng.below(n as u64) as Rank));
                }
            } else {
                // Revoke flooding needs a reliable transport; lossy runs test agreements.
                p.loss_pm = rng.range(10, 250);
                p.cfg.resend_interval = Some(max_delay * rng.range(2, 6) as u32);
                p.check_bound = false;
            }
        }
    }
    p
}

/// Runs one seed of a scenario; `trace` keeps that many steps for a failure report.
pub fn run(s: Scenario, seed: u64, trace: usize) -> Result<Outcome, Failure> {
    let p = params(s, seed);
    let mut sim = Sim::new(p.clone(), seed, trace)?;
    let r = sim.run();
    let r = match r {
        Ok(o) => {
            if s == Scenario::FaultFree {
                // Exactly four rounds of n − 1 messages per agreement, nothing else.
                let total: u64 = o.sent.iter().sum();
                let expect = 4 * (p.n as u64 - 1) * p.ops.len() as u64;
                if total != expect {
                    return Err(Failure {
                        reason: format!("fault-free run sent {total} messages, expected {expect}"),
                        trace: sim.trace(),
                    });
                }
            }
            Ok(o)
        }
        Err(mut f) => {
            f.reason = format!("{} (n={}, ops={:?})", f.reason, p.n, p.ops);
            f.trace = sim.trace();
            Err(f)
        }
    };
    r
}
