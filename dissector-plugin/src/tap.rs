//! A registered Wireshark tap that carries one record type: its id, whether
//! a listener is attached, and queuing a record for the listeners. The
//! `metaroce` tap ([`crate::taps`]) and the `rocev2` tap
//! ([`crate::rocev2_tap`]) are two of these.
#![allow(unsafe_code)]

use std::ffi::{CStr, c_void};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, Ordering};

use epan_sys as ws;

/// A tap whose records are `T`: plain data (`Copy`, so no destructor),
/// copied into the packet's pool, where the listeners read it before the
/// packet is done.
pub(crate) struct Tap<T: Copy> {
    id: AtomicI32,
    record: PhantomData<fn(T)>,
}

impl<T: Copy> Tap<T> {
    /// A tap not registered yet: nobody wants its records.
    pub(crate) const fn new() -> Tap<T> {
        Tap {
            id: AtomicI32::new(-1),
            record: PhantomData,
        }
    }

    /// Registers the tap under `name` (what `-z NAME,...` and the
    /// listeners name).
    ///
    /// # Safety
    /// Called once, from protocol registration.
    pub(crate) unsafe fn register(&self, name: &'static CStr) {
        // SAFETY: `name` is 'static, as register_tap keeps the pointer.
        let id = unsafe { ws::register_tap(name.as_ptr()) };
        self.id.store(id, Ordering::Relaxed);
    }

    /// Whether a listener wants this packet's record.
    pub(crate) fn wanted(&self) -> bool {
        let id = self.id.load(Ordering::Relaxed);
        // SAFETY: a plain query of the tap registry.
        id >= 0 && unsafe { ws::compat::Truth::truth(ws::have_tap_listener(id)) }
    }

    /// Queues `record` for the listeners, copied into the packet's pool.
    ///
    /// # Safety
    /// Valid `pinfo`, during the dissection of its packet.
    pub(crate) unsafe fn queue(&self, pinfo: *mut ws::packet_info, record: T) {
        // wmem aligns its allocations to 8 bytes.
        const { assert!(std::mem::align_of::<T>() <= 8) };
        // SAFETY: the pool lives until the packet is done, after the
        // listeners ran; the allocation is sized for a T and aligned
        // enough (above); T is Copy, so it has no destructor to miss.
        unsafe {
            let slot = ws::wmem_alloc((*pinfo).pool, std::mem::size_of::<T>()).cast::<T>();
            if slot.is_null() {
                return;
            }
            slot.write(record);
            ws::tap_queue_packet(
                self.id.load(Ordering::Relaxed),
                pinfo,
                slot.cast::<c_void>(),
            );
        }
    }
}
