//! Bodies of the fuzz targets for the decoders in this crate's reach that read data from
//! outside the process (fuzz/fuzz_targets/* call them under libFuzzer; the randomized
//! tests in tests/fuzz_decoders.rs call them on stable). Each panics only on a real bug:
//! a decoder that panics, or a message that does not survive encode → decode.

use crate::server::ControlCore;
use crate::wire::{ClientMsg, FrameBuf, ServerMsg};

/// Launcher control protocol: framing, both message decoders, and the launcher's control
/// core fed the frames of several connections (as a stranger or a rank would send them).
pub fn control_wire(data: &[u8]) {
    for body in [data, data.get(4..).unwrap_or(&[])] {
        if let Ok(m) = ClientMsg::decode(body) {
            let again = m.encode().expect("decoded message re-encodes");
            let back = ClientMsg::decode(&again[4..]).expect("re-encoded message decodes");
            assert_eq!(back, m);
        }
        if let Ok(m) = ServerMsg::decode(body) {
            let again = m.encode().expect("decoded message re-encodes");
            let back = ServerMsg::decode(&again[4..]).expect("re-encoded message decodes");
            assert_eq!(back, m);
        }
    }
    let mut core = ControlCore::new(4, 0x1234_5678_9abc_def0);
    // The first byte picks how the stream is cut between three connections.
    let (split, rest) = data.split_first().map_or((1, data), |(s, r)| (*s as usize + 1, r));
    let mut bufs = [FrameBuf::new(), FrameBuf::new(), FrameBuf::new()];
    // As the launcher does, a connection the core closed is read no more.
    let mut closed = [false; 3];
    for (i, chunk) in rest.chunks(split).enumerate() {
        let conn = (i % 3) as u64;
        if closed[i % 3] {
            continue;
        }
        let fb = &mut bufs[i % 3];
        fb.extend(chunk);
        loop {
            match fb.next_body() {
                Ok(Some(body)) => core.handle_frame(conn, &body),
                Ok(None) => break,
                Err(e) => {
                    core.framing_error(conn, e);
                    break;
                }
            }
        }
        while core.poll_transmit().is_some() {}
        while let Some(c) = core.poll_close() {
            if let Some(slot) = closed.get_mut(c as usize) {
                *slot = true;
            }
            // A refused connection was counted already; a rank's is reported gone.
            if core.rank_of(c).is_some() {
                core.conn_closed(c);
            }
        }
        while core.poll_event().is_some() {}
    }
}

/// Control-channel (fault-tolerance mesh) frames: arbitrary bytes never panic the
/// decoder, a frame never claims more bytes than it was given, and valid frames
/// round-trip.
pub fn ft_frame(data: &[u8]) {
    use crate::ft::frame;
    let key = frame::FrameKey::from_job_key(0x0123_4567_89ab_cdef);
    let mut buf = data;
    while let Ok(Some((f, used))) = frame::decode(&key, buf) {
        assert!(used > 0 && used <= buf.len(), "frame used {used} of {} bytes", buf.len());
        let mut out = Vec::new();
        frame::encode(&key, f.kind, f.from, f.sent_ns, &f.payload, &mut out);
        let (back, n) = frame::decode(&key, &out).expect("re-encoded frame").expect("complete");
        assert_eq!((back, n), (f, out.len()));
        buf = &buf[used..];
    }
}

/// Membership protocol messages (the fault-tolerance mesh's payloads).
pub fn membership_wire(data: &[u8]) {
    use steadfast_membership::wire::Message;
    if let Ok(m) = Message::decode(data) {
        assert_eq!(Message::decode(&m.encode()).expect("re-encoded message decodes"), m);
    }
}

/// Checkpoint server protocol: both message decoders (every decoded message survives
/// encode → decode).
pub fn ckpt_store_wire(data: &[u8]) {
    use crate::ckpt_store::{Reply, Request};
    for body in [data, data.get(4..).unwrap_or(&[])] {
        if let Ok(m) = Request::decode(body) {
            let again = m.encode();
            assert_eq!(Request::decode(&again[4..]).expect("re-encoded request decodes"), m);
            if let Request::Put { file, .. } | Request::Get { file } | Request::Verify { file } = &m {
                assert!(crate::ckpt_store::valid_job_name(&file.job), "a decoded job name stays in its directory");
            }
        }
        if let Ok(m) = Reply::decode(body) {
            let again = m.encode();
            assert_eq!(Reply::decode(&again[4..]).expect("re-encoded reply decodes"), m);
        }
    }
}
