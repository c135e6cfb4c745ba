//! One small block of each of QuickJS's allocation size classes, held for an interpreter's
//! whole life ([`Pins`]).
//!
//! QuickJS serves blocks of up to 512 bytes, its 8-byte header included, from 4 KB arenas, one
//! list per size class, and hands an arena back to `malloc` the moment its last block is
//! freed. A program that makes a tool call in a loop allocates and frees the same few objects
//! each time round (the promise, its resolving functions, the job that settles it); where such
//! an object is the only one of its size class, every call made a new arena (4 KB from
//! `malloc`, every block threaded onto its free list) and freed it again: two in three
//! sub-calls did, 0.4k of a sub-call's 23k instructions. With one block of every class held,
//! no class's last arena ever empties, so each class keeps one arena from the start to the end
//! of the run.
//!
//! Guarantees: the blocks are the runtime's own allocations (`js_malloc_rt`), counted under
//! its memory limit like any other, never read nor written, and each freed exactly once before
//! the runtime is: [`Pins`] holds a handle of the runtime, so the runtime outlives them in
//! whatever order their owner's values are dropped (an unwinding panic included). A block the
//! limit refuses is simply not held: that class behaves as it did without pins.

use std::ffi::c_void;
use std::ptr::NonNull;

use rquickjs::{Ctx, Runtime, qjs};

/// The size classes of QuickJS's arenas, in bytes, each including the 8-byte header QuickJS
/// puts ahead of the block it returns (`arena_block_sizes` in `quickjs.c`). Should a later
/// QuickJS change them, a held block still lands in some class; only the saving shrinks.
const CLASSES: [usize; 31] = [
    16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 144, 160, 176, 192, 208, 224,
    240, 256, 288, 320, 352, 384, 416, 448, 480, 512,
];

/// The header QuickJS puts ahead of each block, inside the class's size.
const HEADER: usize = 8;

/// The blocks held, and the runtime they belong to.
pub(crate) struct Pins {
    /// The runtime's raw pointer, valid as long as `_handle` is held.
    runtime: NonNull<qjs::JSRuntime>,
    blocks: Vec<NonNull<c_void>>,
    /// A handle of the runtime: QuickJS frees it only once every handle is gone, so it
    /// outlives the blocks (the field is dropped after `drop` freed them).
    _handle: Runtime,
}

impl Pins {
    /// Allocates one block of each size class from `runtime`, whose context `ctx` is.
    pub(crate) fn hold(runtime: &Runtime, ctx: &Ctx<'_>) -> Option<Pins> {
        // SAFETY: a live context; the runtime it returns is `runtime` (the context was made on
        // it), kept alive by the handle these pins hold.
        #[allow(unsafe_code)]
        let raw = NonNull::new(unsafe { qjs::JS_GetRuntime(ctx.as_raw().as_ptr()) })?;
        let blocks = CLASSES
            .iter()
            .filter_map(|class| {
                // SAFETY: a live runtime; `js_malloc_rt` returns an owned block or null (it
                // throws nothing), freed in `drop` below.
                #[allow(unsafe_code)]
                let block = unsafe { qjs::js_malloc_rt(raw.as_ptr(), (class - HEADER) as _) };
                NonNull::new(block)
            })
            .collect();
        Some(Pins {
            runtime: raw,
            blocks,
            _handle: runtime.clone(),
        })
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        for block in self.blocks.drain(..) {
            // SAFETY: each block came from `js_malloc_rt` on this runtime, which is still alive
            // (`_handle` is dropped after this body), and is freed here once.
            #[allow(unsafe_code)]
            unsafe {
                qjs::js_free_rt(self.runtime.as_ptr(), block.as_ptr())
            };
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use rquickjs::{Context, Runtime, qjs};

    use super::{CLASSES, HEADER, Pins};

    #[test]
    fn one_block_of_every_class_is_held_counted_and_given_back() {
        let runtime = Runtime::new().unwrap();
        let context = Context::full(&runtime).unwrap();
        let before = runtime.memory_usage();
        let pins = context
            .with(|ctx| Pins::hold(&runtime, &ctx))
            .expect("a runtime");
        assert_eq!(pins.blocks.len(), CLASSES.len());
        // Each block fills its class exactly: the header and the classes are QuickJS's.
        for (block, class) in pins.blocks.iter().zip(CLASSES) {
            // SAFETY: a live block of this live runtime, only measured.
            #[allow(unsafe_code)]
            let usable =
                unsafe { qjs::js_malloc_usable_size_rt(pins.runtime.as_ptr(), block.as_ptr()) };
            assert_eq!(usable as usize, class - HEADER);
        }
        let held = runtime.memory_usage();
        assert_eq!(
            held.malloc_count - before.malloc_count,
            CLASSES.len() as i64
        );
        let least: usize = CLASSES.iter().map(|class| class - HEADER).sum();
        assert!((held.malloc_size - before.malloc_size) as usize >= least);
        drop(pins);
        let after = runtime.memory_usage();
        assert_eq!(after.malloc_count, before.malloc_count);
        assert_eq!(after.malloc_size, before.malloc_size);
    }

    #[test]
    fn a_block_the_memory_limit_refuses_is_not_held() {
        let runtime = Runtime::new().unwrap();
        let context = Context::full(&runtime).unwrap();
        let used = runtime.memory_usage().malloc_size as usize;
        // Room for the small classes only.
        runtime.set_memory_limit(used + 1_024);
        let pins = context
            .with(|ctx| Pins::hold(&runtime, &ctx))
            .expect("a runtime");
        assert!(!pins.blocks.is_empty());
        assert!(pins.blocks.len() < CLASSES.len());
        drop(pins);
        runtime.set_memory_limit(0);
        assert_eq!(runtime.memory_usage().malloc_size as usize, used);
    }

    #[test]
    fn the_blocks_keep_their_runtime_whatever_is_dropped_first() {
        let runtime = Runtime::new().unwrap();
        let context = Context::full(&runtime).unwrap();
        let pins = context
            .with(|ctx| Pins::hold(&runtime, &ctx))
            .expect("a runtime");
        // The order an unwinding `let Prepared { .. }` drops them in: the runtime's handle,
        // then the context, then the pins, which must still free into a live runtime.
        let before = runtime.memory_usage().malloc_count;
        drop(runtime);
        drop(context);
        // The runtime is still there, through the pins' own handle, with the blocks counted.
        let usage = pins._handle.memory_usage();
        assert!(usage.malloc_count >= CLASSES.len() as i64);
        assert!(usage.malloc_count <= before);
        drop(pins);
    }
}
