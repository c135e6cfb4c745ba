//! Acknowledgements from a durable session's writer thread to its appenders.
//!
//! Guarantees: an appender's [`AckRx`] resolves with the result the writer gave it, or with
//! [`SessionError::Closed`] if the writer dropped its request unanswered; it never resolves
//! before the writer answered. For a group, the writer wakes ONE waiting appender from its own
//! thread (the leader), and the leader, when polled, wakes the others from where it runs: waking
//! a task from outside its runtime costs a thread wake-up, often a context switch, for each task,
//! while waking it from a thread of the runtime only queues it. The others are never left
//! waiting on the leader for long: if the leader's future is dropped unpolled, its drop wakes
//! them, and the writer wakes any still waiting itself ([`Leader`]'s drop) once it takes the next
//! group or finds none (within about a millisecond, [`crate::queue::Rules`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use crate::error::SessionError;
use crate::queue::WriteQueue;

/// The writer's end of one append's acknowledgement.
pub(crate) struct AckTx {
    slot: Arc<Slot>,
}

/// The appender's end: resolves with the append's result.
pub(crate) struct AckRx {
    slot: Arc<Slot>,
    /// The queue to tell, the first time this acknowledgement is waited for, that an appender
    /// now waits (see [`WriteQueue::nudge`]); `None` once told.
    queue: Option<Arc<WriteQueue>>,
}

#[derive(Default)]
struct Slot(Mutex<SlotState>);

#[derive(Default)]
struct SlotState {
    result: Option<Result<u64, SessionError>>,
    /// The writer answered (the result may since have been taken).
    answered: bool,
    /// The writer dropped the request unanswered.
    abandoned: bool,
    /// The appender took its result or dropped its future.
    finished: bool,
    waker: Option<Waker>,
    /// The rest of the group's waiting appenders, for this one to wake when polled.
    followers: Vec<Waker>,
}

/// A new acknowledgement channel for an append queued on `queue`.
pub(crate) fn channel(queue: &Arc<WriteQueue>) -> (AckTx, AckRx) {
    let slot = Arc::new(Slot::default());
    (
        AckTx { slot: slot.clone() },
        AckRx {
            slot,
            queue: Some(queue.clone()),
        },
    )
}

impl Drop for AckTx {
    fn drop(&mut self) {
        let waker = {
            let mut st = self.slot.0.lock();
            if st.answered {
                return;
            }
            st.abandoned = true;
            st.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl Future for AckRx {
    type Output = Result<u64, SessionError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.slot.0.lock();
        if let Some(result) = st.result.take() {
            st.finished = true;
            let followers = std::mem::take(&mut st.followers);
            drop(st);
            followers.into_iter().for_each(Waker::wake);
            return Poll::Ready(result);
        }
        if st.abandoned {
            st.finished = true;
            return Poll::Ready(Err(SessionError::Closed));
        }
        match &st.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        drop(st);
        // Registered before the queue hears of it: the writer that takes the nudge finds the
        // waker when it answers.
        if let Some(queue) = self.queue.take() {
            queue.nudge();
        }
        Poll::Pending
    }
}

impl Drop for AckRx {
    fn drop(&mut self) {
        let followers = {
            let mut st = self.slot.0.lock();
            st.finished = true;
            std::mem::take(&mut st.followers)
        };
        followers.into_iter().for_each(Waker::wake);
    }
}

/// The appender a group's acknowledgement woke; dropping it wakes whichever of the others it
/// has not woken yet.
pub(crate) struct Leader {
    slot: Arc<Slot>,
}

impl Drop for Leader {
    fn drop(&mut self) {
        let followers = std::mem::take(&mut self.slot.0.lock().followers);
        followers.into_iter().for_each(Waker::wake);
    }
}

/// What answering a group did.
pub(crate) struct Acked {
    /// The member woken, which wakes the others; keep it while the next group gathers (its
    /// members are the ones being woken) and drop it once that group is taken or none came.
    pub leader: Option<Leader>,
    /// How many members were waiting for their answer (polled, not yet finished): the appenders
    /// coming back with their next append. A member nobody waits for yet (an append whose
    /// acknowledgement its caller will look at later, after appending more) is not counted.
    pub waiting: usize,
}

/// Answers every member of a group, then wakes the first one still waiting and leaves it the
/// others to wake.
pub(crate) fn acknowledge(
    answers: impl IntoIterator<Item = (AckTx, Result<u64, SessionError>)>,
) -> Acked {
    let mut waiting: Vec<(Arc<Slot>, Waker)> = Vec::new();
    for (tx, result) in answers {
        let mut st = tx.slot.0.lock();
        st.answered = true;
        if st.finished {
            continue;
        }
        st.result = Some(result);
        if let Some(waker) = st.waker.take() {
            waiting.push((tx.slot.clone(), waker));
        }
    }
    let count = waiting.len();
    let mut waiting = waiting.into_iter();
    while let Some((slot, waker)) = waiting.next() {
        let mut st = slot.0.lock();
        if st.finished {
            // Polled (or dropped) since it was answered: it needs no wake and cannot lead.
            continue;
        }
        st.followers.extend(waiting.map(|(_, w)| w));
        drop(st);
        waker.wake();
        return Acked {
            leader: Some(Leader { slot }),
            waiting: count,
        };
    }
    Acked {
        leader: None,
        waiting: count,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use proptest::prelude::*;

    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count::default());
        (count.clone(), Waker::from(count))
    }

    /// A queue for acknowledgements to tell they are waited for (nothing is queued on it).
    fn queue() -> Arc<WriteQueue> {
        Arc::new(WriteQueue::default())
    }

    fn poll(rx: &mut AckRx, waker: &Waker) -> Poll<Result<u64, SessionError>> {
        Pin::new(rx).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn the_writer_wakes_one_appender_and_that_one_wakes_the_rest() {
        let (txs, mut rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| channel(&queue())).unzip();
        let wakers: Vec<_> = (0..3).map(|_| waker()).collect();
        for (rx, (_, w)) in rxs.iter_mut().zip(&wakers) {
            assert!(poll(rx, w).is_pending());
        }
        let acked = acknowledge(txs.into_iter().zip(0..).map(|(tx, i)| (tx, Ok(i))));
        assert_eq!(acked.waiting, 3, "all three were polled");
        let leader = acked.leader;
        assert!(leader.is_some());
        let woken: Vec<usize> = wakers
            .iter()
            .map(|(c, _)| c.0.load(Ordering::SeqCst))
            .collect();
        assert_eq!(woken, [1, 0, 0], "one wake from the writer's thread");
        assert!(matches!(
            poll(&mut rxs[0], &wakers[0].1),
            Poll::Ready(Ok(0))
        ));
        let woken: Vec<usize> = wakers
            .iter()
            .map(|(c, _)| c.0.load(Ordering::SeqCst))
            .collect();
        assert_eq!(woken, [1, 1, 1], "the leader woke the others");
        assert!(matches!(
            poll(&mut rxs[2], &wakers[2].1),
            Poll::Ready(Ok(2))
        ));
        assert!(matches!(
            poll(&mut rxs[1], &wakers[1].1),
            Poll::Ready(Ok(1))
        ));
        drop(leader);
        assert_eq!(
            wakers[1].0.0.load(Ordering::SeqCst),
            1,
            "nobody is woken twice"
        );
    }

    #[test]
    fn an_unanswered_request_resolves_as_closed() {
        let (tx, mut rx) = channel(&queue());
        let (count, w) = waker();
        assert!(poll(&mut rx, &w).is_pending());
        drop(tx);
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut rx, &w),
            Poll::Ready(Err(SessionError::Closed))
        ));
    }

    proptest! {
        /// Whatever the appenders do (poll before the answer or not, drop their futures before
        /// or after it, poll in any order) and whenever the writer drops the leader: every
        /// future still waiting is woken, each resolves with its own result, and none resolves
        /// before the answer.
        #[test]
        fn every_waiting_appender_is_woken_with_its_own_result(
            plan in prop::collection::vec((any::<bool>(), 0u8..4), 1..12),
            order in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
            leader_dropped_first in any::<bool>(),
        ) {
            let n = plan.len();
            let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel(&queue())).unzip();
            let mut rxs: Vec<Option<AckRx>> = rxs.into_iter().map(Some).collect();
            let wakers: Vec<_> = (0..n).map(|_| waker()).collect();
            let mut seen = vec![0usize; n];
            for (i, (polled, _)) in plan.iter().enumerate() {
                if *polled {
                    let rx = rxs[i].as_mut().expect("live");
                    prop_assert!(poll(rx, &wakers[i].1).is_pending());
                }
            }
            // Drop-before-answer: those whose plan says 0.
            for (i, (_, fate)) in plan.iter().enumerate() {
                if *fate == 0 {
                    rxs[i] = None;
                }
            }
            let acked = acknowledge(
                txs.into_iter().zip(0u64..).map(|(tx, i)| (tx, Ok(i))),
            );
            // Those polled and still there when answered are the ones waiting.
            let expected = plan.iter().filter(|(polled, fate)| *polled && *fate != 0).count();
            prop_assert_eq!(acked.waiting, expected);
            let mut leader = acked.leader;
            if leader_dropped_first {
                drop(leader.take());
            }
            // Drop-after-answer, unpolled: those whose plan says 1.
            for (i, (_, fate)) in plan.iter().enumerate() {
                if *fate == 1 {
                    rxs[i] = None;
                }
            }
            let mut done = HashSet::new();
            let mut step = |i: usize, rxs: &mut Vec<Option<AckRx>>, done: &mut HashSet<usize>| {
                let woken = wakers[i].0.0.load(Ordering::SeqCst);
                if let Some(rx) = rxs[i].as_mut()
                    && woken > seen[i]
                {
                    seen[i] = woken;
                    match poll(rx, &wakers[i].1) {
                        Poll::Ready(result) => {
                            assert!(matches!(result, Ok(s) if s == i as u64));
                            done.insert(i);
                            rxs[i] = None;
                        }
                        Poll::Pending => {}
                    }
                }
            };
            for ix in &order {
                step(ix.index(n), &mut rxs, &mut done);
            }
            drop(leader.take());
            // Run everything woken until nothing more is.
            for _ in 0..n + 1 {
                for i in 0..n {
                    step(i, &mut rxs, &mut done);
                }
            }
            for (i, (polled, fate)) in plan.iter().enumerate() {
                if *polled && *fate > 1 {
                    prop_assert!(done.contains(&i), "appender {i} was never woken");
                }
            }
            // Those never polled find their result on their first poll.
            for (i, rx) in rxs.iter_mut().enumerate() {
                if let Some(rx) = rx {
                    let result = poll(rx, &wakers[i].1);
                    prop_assert!(matches!(result, Poll::Ready(Ok(s)) if s == i as u64));
                }
            }
        }
    }
}
