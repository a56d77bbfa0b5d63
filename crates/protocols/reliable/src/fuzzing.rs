//! Harnesses shared by the fuzz targets (`fuzz/`, nightly libFuzzer) and by the
//! randomized tests that run on stable: each takes arbitrary bytes, must never panic,
//! and asserts its own oracle. Not part of the supported API.

use std::collections::VecDeque;

use crate::frame::{Frame, FrameKey, FrameRepr, HEADER_LEN, MAGIC, VERSION};
use crate::{crc, Channel, Config, Event};

const KEY: u64 = 0x0123_4567_89ab_cdef;

/// Decodes arbitrary bytes as a frame. The first input byte selects whether the
/// header checksum (bit 0) and magic/version (bit 1) are patched to valid values first,
/// so the fuzzer reaches the field checks behind the checksum.
///
/// Oracle: a frame that decodes re-emits to the same header bytes, its fields are
/// consistent, and verify-only and copy-and-verify agree on the payload.
pub fn frame_decode(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if buf.len() >= HEADER_LEN {
        if mode & 2 != 0 {
            buf[..4].copy_from_slice(&MAGIC.to_le_bytes());
            buf[4] = VERSION;
        }
        if mode & 1 != 0 {
            let c = crc::crc32c(&buf[..HEADER_LEN - 4]);
            buf[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&c.to_le_bytes());
        }
    }
    let Ok(frame) = Frame::new_checked(&buf[..]) else {
        return;
    };
    let repr = frame.repr();
    assert_eq!(repr.check(), Ok(()));
    assert_eq!(repr.payload_len as usize, frame.payload().len());
    let mut header = [0u8; HEADER_LEN];
    assert_eq!(repr.emit(&mut header), Ok(()));
    assert_eq!(&header[..], &buf[..HEADER_LEN]);
    let mut out = vec![0xAA];
    let copied = frame.copy_payload_checked(&mut out);
    assert_eq!(copied.is_ok(), frame.verify_payload().is_ok());
    if copied.is_ok() {
        assert_eq!(&out[1..], frame.payload());
    } else {
        assert_eq!(out, vec![0xAA]);
    }
}

/// Reads the fuzz input as a little program.
struct Ops<'a>(&'a [u8]);

impl Ops<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.byte().unwrap_or(0)) | u16::from(self.byte().unwrap_or(0)) << 8
    }
    fn u64(&mut self) -> u64 {
        (0..4).fold(0u64, |acc, i| acc | u64::from(self.u16()) << (16 * i))
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head.to_vec()
    }
}

/// Runs two channels, A sending to B, through a sequence of operations read from
/// `data`: sends, deliveries of real frames (possibly with one damaged byte), drops,
/// frames forged by someone holding the job key, timer advances, route failures.
///
/// Oracle: nothing panics (debug builds also check the channel's internal invariants
/// and that it never emits an inconsistent frame), and as long as no forged frame was
/// fed to B, B delivers exactly a prefix of what A sent, in order.
pub fn channel_ops(data: &[u8]) {
    let mut cfg = Config::new(KEY, 0, 1);
    cfg.routes = 2;
    cfg.max_payload = 64;
    cfg.send_window_frags = 8;
    cfg.send_window_bytes = 512;
    cfg.recv_window_frags = 8;
    cfg.recv_buffer_bytes = 512;
    cfg.send_buffer_bytes = 2048;
    cfg.rto_initial_ns = 1_000_000;
    cfg.rto_min_ns = 1_000_000;
    cfg.rto_max_ns = 8_000_000;
    cfg.retries_per_route = 3;
    let (Ok(mut a), Ok(mut b)) = (Channel::new(cfg.clone()), Channel::new(cfg.mirrored())) else {
        return;
    };
    let mut ops = Ops(data);
    let mut now = 0u64;
    let mut a_to_b: VecDeque<Vec<u8>> = VecDeque::new();
    let mut b_to_a: VecDeque<Vec<u8>> = VecDeque::new();
    let mut sent: Vec<u8> = Vec::new();
    let mut delivered: Vec<u8> = Vec::new();
    let mut forged_into_b = false;
    let mut counter = 0u8;
    while let Some(op) = ops.byte() {
        match op % 10 {
            0 => {
                let len = usize::from(ops.u16() % 300);
                let msg: Vec<u8> = (0..len)
                    .map(|_| {
                        counter = counter.wrapping_add(1);
                        counter
                    })
                    .collect();
                if a.send(now, &msg).is_ok() {
                    sent.extend_from_slice(&msg);
                }
            }
            1 | 2 => {
                if let Some(mut f) = a_to_b.pop_front() {
                    if op % 10 == 2 && !f.is_empty() {
                        // One damaged byte: a burst under 32 bits, always detected.
                        let at = usize::from(ops.u16()) % f.len();
                        f[at] ^= ops.byte().unwrap_or(1).max(1);
                    }
                    b.handle(now, &f);
                }
            }
            3 => {
                if let Some(f) = b_to_a.pop_front() {
                    a.handle(now, &f);
                }
            }
            4 => {
                a_to_b.pop_front();
            }
            5 | 6 => {
                let to_b = op % 10 == 5;
                let kind = ops.byte().unwrap_or(1) % 3 + 1;
                let len = usize::from(ops.byte().unwrap_or(0));
                let payload = ops.bytes(len);
                let repr = FrameRepr {
                    kind_code: kind,
                    flags: ops.byte().unwrap_or(0) & 1,
                    route: ops.byte().unwrap_or(0),
                    src: if to_b { 0 } else { 1 },
                    dst: if to_b { 1 } else { 0 },
                    seq: ops.u64() % 64,
                    timestamp: ops.u64(),
                    send_count: u32::from(ops.u16()),
                    msg_id: ops.u64() % 8,
                    msg_len: ops.u64() % 1024,
                    frag_offset: ops.u64() % 1024,
                    cum_received: ops.u64() % 64,
                    cum_delivered: ops.u64() % 64,
                    max_received: ops.u64() % 64,
                    ..FrameRepr::default()
                };
                if let Ok(frame) = repr.to_sealed_frame(&FrameKey::from_job_key(KEY), &payload) {
                    if to_b {
                        forged_into_b = true;
                        b.handle(now, &frame);
                    } else {
                        a.handle(now, &frame);
                    }
                }
            }
            7 => {
                now = now.saturating_add(u64::from(ops.u16()) * 10_000);
                a.handle_timeout(now);
                b.handle_timeout(now);
            }
            8 => {
                let r = ops.byte().unwrap_or(0);
                if r & 0x80 != 0 {
                    a.restore_route(r % 3);
                } else {
                    a.fail_route(r % 3);
                }
            }
            _ => {
                let n = usize::from(ops.byte().unwrap_or(0));
                let raw = ops.bytes(n);
                // Raw bytes that happen to form a keyed frame are a forgery too.
                forged_into_b |= Frame::new_checked(&raw[..]).is_ok_and(|f| f.verify_tag(&FrameKey::from_job_key(KEY)));
                b.handle(now, &raw);
            }
        }
        while let Some(t) = a.poll_transmit(now) {
            a_to_b.push_back(t.to_vec());
        }
        while let Some(t) = b.poll_transmit(now) {
            b_to_a.push_back(t.to_vec());
        }
        while a_to_b.len() > 64 {
            a_to_b.pop_front();
        }
        while b_to_a.len() > 64 {
            b_to_a.pop_front();
        }
        while let Some(e) = b.poll_event() {
            if let Event::Delivered(d) = e {
                delivered.extend_from_slice(&d.data);
                if !forged_into_b {
                    assert!(
                        delivered.len() <= sent.len(),
                        "delivered more than was sent"
                    );
                    assert_eq!(
                        &delivered[..],
                        &sent[..delivered.len()],
                        "delivered bytes differ"
                    );
                }
            }
        }
        while a.poll_event().is_some() {}
        let _ = (a.poll_timeout(), b.poll_timeout());
    }
}
