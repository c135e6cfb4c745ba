//! The queue between a durable session's appenders and its writer thread.
//!
//! Guarantees: appends leave the queue in the order they entered it (appenders push under the
//! session's state lock, so that is seq order); a group is a prefix of the queue within the group
//! limits; after a group is acknowledged with n of its appenders waiting for it (the writer
//! counts them, `crate::ack::Acked`), the next waits until n appends are queued, at most
//! [`Rules::gather`] after its first one arrived, and not at all if that one arrived more than
//! [`Rules::idle`] after the acknowledgement or n is 1; if m appends were queued when that group
//! became durable, it waits for n + m for up to [`Rules::merge`] after the acknowledgement, so
//! that appenders split across two syncs come together again; appends nobody waits for yet (an appender
//! that queues several events, then waits for the last) do not start a group: the first wait on
//! a queued append does ([`WriteQueue::nudge`]), or [`Rules::unawaited`] after the first of them
//! arrived, so a caller's events before the one it waits for share that one's sync; the writer
//! looks again for up to [`SPIN`] (yielding its core to the appenders), then sleeps and is woken
//! when the group is complete, so gathering a group of concurrent appends costs it at most one
//! wake-up, not one per append, and usually none; a close or a hang-up (every session handle dropped) is reported only once everything queued
//! before it has been taken; once the writer has stopped, pushes are refused and the appends
//! still queued are dropped (their callers see the session closed).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

use crate::writer::WriteReq;

/// How long [`WriteQueue::next`] looks again, yielding its core between looks, for the
/// appenders of the last group before it sleeps: they were waiting for that group's
/// acknowledgement and come back within tens of microseconds, and a sleep would add a
/// cross-thread wake-up (10-20 µs on a 2-core VM) to every group of concurrent appends.
const SPIN: Duration = Duration::from_micros(40);

/// How groups are formed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// Most appends in one group.
    pub appends: usize,
    /// Most bytes in one group (a single larger line still forms its own group).
    pub bytes: usize,
    /// How long a group smaller than the last one waits for the rest after its first append
    /// arrived: with concurrent appenders, the rest are the callers just woken by the last
    /// acknowledgement, and syncing without them halves the appends per sync.
    pub gather: Duration,
    /// A group whose first append arrived this long after the last acknowledgement does not
    /// wait: the appenders were not coming straight back.
    pub idle: Duration,
    /// How long queued appends nobody waits for are kept before they are written anyway (their
    /// callers may never look: a turn's end, a step's timing).
    pub unawaited: Duration,
    /// How long after an acknowledgement a group already holding as many appends as the
    /// acknowledged group's waiting appenders (appends queued while that group was written)
    /// also waits for those appenders: when they come straight back, the two halves of the same
    /// appenders go with one sync instead of splitting every sync in two for good; when they do
    /// not (a call's body runs after its append), the queued appends wait no longer than this.
    pub merge: Duration,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            appends: 4096,
            bytes: 8 << 20,
            gather: Duration::from_micros(200),
            idle: Duration::from_millis(1),
            unawaited: Duration::from_millis(2),
            merge: SPIN,
        }
    }
}

/// What the next group waits for, as the last acknowledgement left it
/// ([`WriteQueue::next_after`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// How many of the last group's appenders were waiting for it (they come back with their
    /// next append), at least 1.
    pub appends: usize,
    /// How many appends were queued once the last group was durable, before its members were
    /// answered (0 when none of them was waiting: nobody comes back to join them).
    pub queued: usize,
}

/// What the writer is given next.
pub(crate) enum Next {
    /// Appends to write as one group, in seq order, and their total bytes.
    Group(Vec<WriteReq>, usize),
    /// Nothing is queued and the session was closed: release the sink and answer.
    Close(oneshot::Sender<()>),
    /// Nothing is queued and no session handle is left.
    HungUp,
}

/// Appends waiting for the writer thread.
#[derive(Default)]
pub(crate) struct WriteQueue {
    rules: Rules,
    pending: Mutex<Pending>,
    wake: Condvar,
}

#[derive(Default)]
struct Pending {
    reqs: VecDeque<WriteReq>,
    bytes: usize,
    close: Option<oneshot::Sender<()>>,
    hung_up: bool,
    stopped: bool,
    /// When the first append now queued arrived.
    first_at: Option<Instant>,
    /// An appender waits for one of the appends queued (or, harmlessly, for one already taken
    /// while others were queued): they go without waiting for [`Rules::unawaited`].
    nudged: bool,
    /// While the writer sleeps: how many queued appends wake it (0 while it is awake).
    want: usize,
    /// The writer sleeps with nothing queued and no deadline: the first append must wake it
    /// even if nobody waits for it yet, so that it is written within [`Rules::unawaited`].
    untimed: bool,
}

impl WriteQueue {
    /// An empty queue forming groups by `rules`.
    #[cfg(test)]
    pub(crate) fn with_rules(rules: Rules) -> WriteQueue {
        WriteQueue {
            rules,
            ..WriteQueue::default()
        }
    }

    /// Whether a full group is queued.
    fn full(&self, p: &Pending) -> bool {
        p.reqs.len() >= self.rules.appends || p.bytes >= self.rules.bytes
    }

    /// Whether `target` appends, someone waiting for one of them, or a full group, are queued.
    fn ready(&self, p: &Pending, target: usize) -> bool {
        (p.nudged && p.reqs.len() >= target.max(1)) || self.full(p)
    }

    /// Queues one append. Refused (handed back) once the writer has stopped.
    pub(crate) fn push(&self, req: WriteReq) -> Result<(), WriteReq> {
        let mut p = self.pending.lock();
        if p.stopped {
            return Err(req);
        }
        let first = p.reqs.is_empty();
        if first {
            p.first_at = Some(Instant::now());
        }
        p.bytes += req.line.len();
        p.reqs.push_back(req);
        if p.want > 0 && (self.ready(&p, p.want) || (first && p.untimed)) {
            p.want = 0;
            p.untimed = false;
            self.wake.notify_one();
        }
        Ok(())
    }

    /// How many appends are queued.
    pub(crate) fn queued(&self) -> usize {
        self.pending.lock().reqs.len()
    }

    /// An appender now waits for its append's acknowledgement: what is queued goes as soon as
    /// the group rules allow, instead of after [`Rules::unawaited`].
    pub(crate) fn nudge(&self) {
        let mut p = self.pending.lock();
        if p.reqs.is_empty() || p.nudged {
            return;
        }
        p.nudged = true;
        // Whatever the writer sleeps for (the group to fill, or the unawaited time), the rules
        // it goes by have changed: it looks again.
        if p.want > 0 {
            p.want = 0;
            p.untimed = false;
            self.wake.notify_one();
        }
    }

    /// Asks the writer to write what is queued, then release the sink and answer `ack`. Answers
    /// at once if the writer has already stopped.
    pub(crate) fn close(&self, ack: oneshot::Sender<()>) {
        let mut p = self.pending.lock();
        if p.stopped {
            let _ = ack.send(());
            return;
        }
        p.close = Some(ack);
        self.wake.notify_one();
    }

    /// Tells the writer that no session handle is left: it stops once the queue is empty.
    pub(crate) fn hang_up(&self) {
        self.pending.lock().hung_up = true;
        self.wake.notify_one();
    }

    /// [`WriteQueue::next_after`] a group of `target` waiting appenders, none queued behind it.
    #[cfg(test)]
    pub(crate) fn next(&self, target: usize, acked: Instant) -> Option<Next> {
        self.next_after(
            Target {
                appends: target,
                queued: 0,
            },
            acked,
        )
    }

    /// Waits for the next group, the last one having been acknowledged at `acked` as `target`
    /// says. It goes once `target.appends` appends are queued, and, for [`Rules::merge`] after
    /// `acked`, only once [`Target::queued`] more are; or [`Rules::gather`] after its first
    /// append arrived (or after `acked`, if that append was queued before); at once if the
    /// count it waits for is 1, if that append arrived [`Rules::idle`] after `acked`, or if a
    /// close or hang-up is pending. `None` once [`Rules::idle`] has passed with nothing queued:
    /// then [`wait`] for the first append, which goes without waiting for others.
    ///
    /// [`wait`]: WriteQueue::wait
    pub(crate) fn next_after(&self, target: Target, acked: Instant) -> Option<Next> {
        let rules = self.rules;
        let merge_until = acked + rules.merge;
        let mut spin_until: Option<Instant> = None;
        let mut p = self.pending.lock();
        loop {
            let merging = target.queued > 0 && Instant::now() < merge_until;
            let target = if merging {
                target.appends + target.queued
            } else {
                target.appends
            };
            let queued = !p.reqs.is_empty();
            if queued && (self.ready(&p, target) || p.close.is_some() || p.hung_up) {
                return Some(self.take(&mut p));
            }
            if !queued {
                if let Some(ack) = p.close.take() {
                    return Some(Next::Close(ack));
                }
                if p.hung_up {
                    return Some(Next::HungUp);
                }
            }
            let now = Instant::now();
            if queued && !p.nudged {
                // Nobody waits for what is queued yet: its appender may be about to queue the
                // event it waits for, which these should share a sync with.
                let deadline = p.first_at.unwrap_or(now) + rules.unawaited;
                if now >= deadline {
                    return Some(self.take(&mut p));
                }
                p.want = target.max(1);
                let _ = self.wake.wait_until(&mut p, deadline);
                p.want = 0;
                continue;
            }
            if target <= 1 {
                return queued.then(|| self.take(&mut p));
            }
            let wake_at = match p.first_at {
                Some(first) => {
                    let deadline = first.max(acked) + rules.gather;
                    if first >= acked + rules.idle || now >= deadline {
                        return Some(self.take(&mut p));
                    }
                    deadline
                }
                None => {
                    let idle_at = acked + rules.idle;
                    if now >= idle_at {
                        return None;
                    }
                    // Not woken by the first arrival: look again for one every `gather`.
                    idle_at.min(now + rules.gather)
                }
            };
            // The appenders just woken come straight back: look again, yielding the core to
            // them, before sleeping, so that their return costs no wake-up of this thread.
            if now < *spin_until.get_or_insert(now + SPIN) {
                parking_lot::MutexGuard::unlocked(&mut p, std::thread::yield_now);
                continue;
            }
            let wake_at = if merging {
                wake_at.min(merge_until)
            } else {
                wake_at
            };
            p.want = target;
            let _ = self.wake.wait_until(&mut p, wake_at);
            p.want = 0;
        }
    }

    /// Sleeps until an append someone waits for is queued, appends nobody waits for have been
    /// queued for [`Rules::unawaited`], a group is full, or a close or hang-up is pending.
    pub(crate) fn wait(&self) {
        let mut p = self.pending.lock();
        while p.close.is_none() && !p.hung_up && !self.ready(&p, 1) {
            p.want = 1;
            match p.first_at {
                Some(first) if !p.reqs.is_empty() => {
                    let deadline = first + self.rules.unawaited;
                    if Instant::now() >= deadline {
                        break;
                    }
                    let _ = self.wake.wait_until(&mut p, deadline);
                }
                _ => {
                    p.untimed = true;
                    self.wake.wait(&mut p);
                    p.untimed = false;
                }
            }
        }
        p.want = 0;
    }

    /// Marks the writer stopped and drops whatever is still queued (their callers see the
    /// session closed); answers a pending close.
    pub(crate) fn stop(&self) {
        let (reqs, close) = {
            let mut p = self.pending.lock();
            p.stopped = true;
            p.bytes = 0;
            p.first_at = None;
            p.nudged = false;
            (std::mem::take(&mut p.reqs), p.close.take())
        };
        drop(reqs);
        if let Some(ack) = close {
            let _ = ack.send(());
        }
    }

    /// Takes the longest prefix within the group limits (at least one append).
    fn take(&self, p: &mut Pending) -> Next {
        let mut count = 0;
        let mut bytes = 0;
        for req in &p.reqs {
            if count > 0 && (count >= self.rules.appends || bytes >= self.rules.bytes) {
                break;
            }
            count += 1;
            bytes += req.line.len();
        }
        p.bytes -= bytes;
        let group = if count == p.reqs.len() {
            p.first_at = None;
            p.nudged = false;
            Vec::from(std::mem::take(&mut p.reqs))
        } else {
            // The rest were queued by now: they count as arrived now.
            p.first_at = Some(Instant::now());
            p.reqs.drain(..count).collect()
        };
        Next::Group(group, bytes)
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::ack::{self, AckRx};
    use crate::event::Event;

    fn req(q: &Arc<WriteQueue>, seq: u64, len: usize) -> (WriteReq, AckRx) {
        let (ack, rx) = ack::channel(q);
        let req = WriteReq {
            seq,
            event: Event::turn_start(1),
            line: vec![b'x'; len],
            ack,
        };
        (req, rx)
    }

    /// Queues an append nobody waits for yet.
    fn push_unawaited(q: &Arc<WriteQueue>, seq: u64, len: usize) -> AckRx {
        let (r, rx) = req(q, seq, len);
        assert!(q.push(r).is_ok());
        rx
    }

    /// Queues an append and waits for it (polls its acknowledgement once).
    fn push(q: &Arc<WriteQueue>, seq: u64, len: usize) -> AckRx {
        let mut rx = push_unawaited(q, seq, len);
        let waited = std::pin::Pin::new(&mut rx)
            .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
        assert!(waited.is_pending());
        rx
    }

    fn group(next: Option<Next>) -> Vec<u64> {
        match next {
            Some(Next::Group(g, bytes)) => {
                assert_eq!(bytes, g.iter().map(|r| r.line.len()).sum::<usize>());
                g.iter().map(|r| r.seq).collect()
            }
            _ => panic!("expected a group"),
        }
    }

    const LATER: Duration = Duration::from_secs(30);

    /// Waits long enough that a test would time out rather than pass by accident.
    fn patient() -> Arc<WriteQueue> {
        Arc::new(WriteQueue::with_rules(Rules {
            gather: LATER,
            idle: LATER,
            unawaited: LATER,
            ..Rules::default()
        }))
    }

    #[test]
    fn a_lone_append_goes_at_once() {
        let q = patient();
        let _rx = push(&q, 0, 10);
        let start = Instant::now();
        assert_eq!(group(q.next(1, Instant::now())), [0]);
        assert!(start.elapsed() < LATER / 2);
    }

    #[test]
    fn a_group_waits_for_as_many_appends_as_the_last_one_held() {
        let q = patient();
        let pusher = {
            let q = q.clone();
            std::thread::spawn(move || {
                (0..3)
                    .map(|seq| {
                        std::thread::sleep(Duration::from_millis(5));
                        push(&q, seq, 10)
                    })
                    .collect::<Vec<_>>()
            })
        };
        let start = Instant::now();
        assert_eq!(group(q.next(3, Instant::now())), [0, 1, 2]);
        assert!(start.elapsed() < LATER / 2);
        drop(pusher.join());
    }

    #[test]
    fn a_partial_group_goes_once_the_gather_wait_after_its_first_append_has_passed() {
        let q = Arc::new(WriteQueue::with_rules(Rules {
            gather: Duration::from_millis(20),
            idle: LATER,
            unawaited: LATER,
            ..Rules::default()
        }));
        let acked = Instant::now();
        let _rxs = [push(&q, 0, 1), push(&q, 1, 1)];
        assert_eq!(group(q.next(10, acked)), [0, 1]);
        let waited = acked.elapsed();
        assert!(waited >= Duration::from_millis(20) && waited < LATER / 2);
    }

    #[test]
    fn an_append_after_the_appenders_went_idle_goes_at_once() {
        let q = Arc::new(WriteQueue::with_rules(Rules {
            gather: LATER,
            idle: Duration::from_millis(2),
            unawaited: LATER,
            ..Rules::default()
        }));
        let acked = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        let _rx = push(&q, 0, 1);
        let start = Instant::now();
        assert_eq!(group(q.next(10, acked)), [0]);
        assert!(start.elapsed() < LATER / 2);
    }

    /// After a group of `appends` waiting appenders whose write saw `queued` more queued.
    fn after(appends: usize, queued: usize) -> Target {
        Target { appends, queued }
    }

    #[test]
    fn appends_queued_during_a_write_wait_for_the_appenders_that_write_answered() {
        // Two of four appenders were answered; the other two queued while their group was
        // written. The next group waits for all four, not for the first two to arrive.
        let q = Arc::new(WriteQueue::with_rules(Rules {
            merge: LATER,
            ..patient().rules
        }));
        let acked = Instant::now();
        let _early = [push(&q, 0, 1), push(&q, 1, 1)];
        let back = {
            let q = q.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                // Not polled here: the group may be taken (and its answers dropped) at once.
                // The earlier appends' waits already count for these.
                [push_unawaited(&q, 2, 1), push_unawaited(&q, 3, 1)]
            })
        };
        let start = Instant::now();
        assert_eq!(group(q.next_after(after(2, 2), acked)), [0, 1, 2, 3]);
        assert!(start.elapsed() < LATER / 2);
        drop(back.join());
    }

    #[test]
    fn appends_queued_during_a_write_wait_no_longer_than_the_merge_time_for_the_rest() {
        // The answered appenders do not come back (their calls' bodies run): the two queued
        // appends go once the merge time has passed, not after the gather time.
        let q = Arc::new(WriteQueue::with_rules(Rules {
            merge: Duration::from_millis(20),
            ..patient().rules
        }));
        let acked = Instant::now();
        let _early = [push(&q, 0, 1), push(&q, 1, 1)];
        assert_eq!(group(q.next_after(after(2, 2), acked)), [0, 1]);
        let waited = acked.elapsed();
        assert!(waited >= Duration::from_millis(20) && waited < LATER / 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the split, with the answered appenders coming back the next group holds
        /// them and the ones queued behind the write, in queue order.
        #[test]
        fn a_split_group_comes_together_again(answered in 1usize..6, queued in 1usize..6) {
            let q = Arc::new(WriteQueue::with_rules(Rules {
                merge: LATER,
                ..patient().rules
            }));
            let acked = Instant::now();
            let mut rxs: Vec<AckRx> = (0..queued as u64).map(|seq| push(&q, seq, 1)).collect();
            let back = {
                let q = q.clone();
                std::thread::spawn(move || {
                    (queued..queued + answered)
                        .map(|seq| push_unawaited(&q, seq as u64, 1))
                        .collect::<Vec<_>>()
                })
            };
            let taken = group(q.next_after(after(answered, queued), acked));
            rxs.extend(back.join().expect("appenders"));
            prop_assert_eq!(taken, (0..(queued + answered) as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn after_the_idle_time_with_nothing_queued_the_first_append_goes_alone_at_once() {
        let q = Arc::new(WriteQueue::with_rules(Rules {
            gather: LATER,
            idle: Duration::from_millis(2),
            unawaited: LATER,
            ..Rules::default()
        }));
        assert!(q.next(10, Instant::now()).is_none());
        let pusher = {
            let q = q.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                push(&q, 7, 10)
            })
        };
        q.wait();
        assert_eq!(group(q.next(1, Instant::now())), [7]);
        drop(pusher.join());
    }

    #[test]
    fn appends_nobody_waits_for_go_with_the_first_one_waited_for() {
        let q = patient();
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                q.wait();
                group(q.next(1, Instant::now()))
            })
        };
        let _rxs = [
            push_unawaited(&q, 0, 10),
            push_unawaited(&q, 1, 10),
            push_unawaited(&q, 2, 10),
        ];
        // Only a wait starts the group: with `unawaited` 30 s, an early group would hold 0-2.
        let _waited = push(&q, 3, 10);
        assert_eq!(writer.join().ok(), Some(vec![0, 1, 2, 3]));
    }

    #[test]
    fn waiting_for_an_append_already_queued_wakes_the_writer() {
        let q = patient();
        let mut rx = push_unawaited(&q, 0, 10);
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                q.wait();
                (group(q.next(1, Instant::now())), start.elapsed())
            })
        };
        std::thread::sleep(Duration::from_millis(5));
        let waker = std::task::Waker::noop();
        let polled = std::pin::Pin::new(&mut rx).poll(&mut std::task::Context::from_waker(waker));
        assert!(polled.is_pending());
        let (taken, took) = writer.join().unwrap_or_else(|_| panic!("the writer"));
        assert_eq!(taken, [0]);
        assert!(took < LATER / 2, "{took:?}");
    }

    #[test]
    fn appends_nobody_waits_for_are_written_once_they_have_waited_the_unawaited_time() {
        let unawaited = Duration::from_millis(20);
        let q = Arc::new(WriteQueue::with_rules(Rules {
            gather: LATER,
            idle: LATER,
            unawaited,
            ..Rules::default()
        }));
        let pushed = Instant::now();
        let _rxs = [push_unawaited(&q, 0, 1), push_unawaited(&q, 1, 1)];
        q.wait();
        assert!(pushed.elapsed() >= unawaited);
        assert_eq!(group(q.next(1, Instant::now())), [0, 1]);
        let pushed = Instant::now();
        let _rx = push_unawaited(&q, 2, 1);
        assert_eq!(group(q.next(5, Instant::now())), [2]);
        let waited = pushed.elapsed();
        assert!(waited >= unawaited && waited < LATER / 2, "{waited:?}");
    }

    #[test]
    fn an_append_nobody_waits_for_reaching_an_idle_writer_is_written_after_the_unawaited_time() {
        let unawaited = Duration::from_millis(20);
        let q = Arc::new(WriteQueue::with_rules(Rules {
            gather: LATER,
            idle: LATER,
            unawaited,
            ..Rules::default()
        }));
        let writer = {
            let q = q.clone();
            std::thread::spawn(move || {
                // Asleep with nothing queued when the append comes.
                q.wait();
                group(q.next(1, Instant::now()))
            })
        };
        std::thread::sleep(Duration::from_millis(5));
        let pushed = Instant::now();
        let _rx = push_unawaited(&q, 0, 1);
        assert_eq!(writer.join().ok(), Some(vec![0]));
        let waited = pushed.elapsed();
        assert!(waited >= unawaited && waited < LATER / 2, "{waited:?}");
    }

    #[test]
    fn close_and_hang_up_come_after_everything_queued_before_them() {
        let q = patient();
        let _rxs = [push(&q, 0, 1), push(&q, 1, 1)];
        let (ack, _closed) = oneshot::channel();
        q.close(ack);
        assert_eq!(group(q.next(10, Instant::now())), [0, 1]);
        assert!(matches!(q.next(10, Instant::now()), Some(Next::Close(_))));

        let q = patient();
        let _rx = push(&q, 0, 1);
        q.hang_up();
        assert_eq!(group(q.next(10, Instant::now())), [0]);
        assert!(matches!(q.next(10, Instant::now()), Some(Next::HungUp)));
    }

    #[test]
    fn once_stopped_pushes_are_refused_and_queued_appends_resolve_as_closed() {
        let q = Arc::new(WriteQueue::default());
        let rx = push(&q, 0, 1);
        q.stop();
        assert!(q.push(req(&q, 1, 1).0).is_err());
        let result = futures::executor::block_on(rx);
        assert!(matches!(result, Err(crate::error::SessionError::Closed)));
    }

    proptest! {
        /// However pushes and takes interleave, groups are prefixes of the queue in push order,
        /// never empty, and within the limits (a group passes the byte limit only by its last
        /// line).
        #[test]
        fn groups_are_ordered_prefixes_within_the_limits(
            appends in 1usize..6,
            bytes in 1usize..64,
            rounds in prop::collection::vec(prop::collection::vec(1usize..24, 0..10), 1..12),
        ) {
            let q = Arc::new(WriteQueue::with_rules(Rules { appends, bytes, ..Rules::default() }));
            let mut pushed = 0u64;
            let mut taken = Vec::new();
            let mut rxs = Vec::new();
            for round in &rounds {
                for len in round {
                    rxs.push(push(&q, pushed, *len));
                    pushed += 1;
                }
                // Take one group, as the writer does after each sync.
                if let Some(Next::Group(g, _)) = q.next(1, Instant::now()) {
                    prop_assert!(!g.is_empty() && g.len() <= appends);
                    let before_last: usize = g[..g.len() - 1].iter().map(|r| r.line.len()).sum();
                    prop_assert!(before_last < bytes);
                    taken.extend(g.iter().map(|r| r.seq));
                }
            }
            while let Some(Next::Group(g, _)) = q.next(1, Instant::now()) {
                taken.extend(g.iter().map(|r| r.seq));
            }
            prop_assert_eq!(taken, (0..pushed).collect::<Vec<u64>>());
        }
    }
}
