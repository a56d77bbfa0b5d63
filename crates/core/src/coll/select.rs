//! Algorithm selection: the one place that decides which algorithm a collective uses.
//!
//! The rule only depends on values every rank agrees on (communicator size, the total size
//! of the data — equal everywhere by the type-signature rule —, the count of a reduction and
//! the op's commutativity), so all ranks pick the same algorithm. The thresholds and forced
//! choices are `STEADFAST_COLL_*` variables, documented with the rule in docs/collectives.md.

/// Tunables of algorithm selection, read from the environment once.
#[derive(Debug, Clone)]
pub struct CollConfig {
    /// `STEADFAST_COLL_BCAST_LONG` (bytes, default 12288): broadcasts of at least this many
    /// bytes on at least 4 ranks use scatter + ring allgather; smaller ones a binomial tree.
    pub bcast_long: usize,
    /// `STEADFAST_COLL_ALLREDUCE_LONG` (bytes, default 2048): allreduces of at least this
    /// many bytes with a commutative op and count ≥ 2^⌊log2 n⌋ use Rabenseifner's
    /// reduce-scatter + allgather; others recursive doubling.
    pub allreduce_long: usize,
    /// `STEADFAST_COLL_REDUCE_LONG` (bytes, default 8192): reduces of at least this many
    /// bytes with a commutative op and count ≥ 2^⌊log2 n⌋ use reduce-scatter + gather;
    /// others a binomial tree.
    pub reduce_long: usize,
    /// `STEADFAST_COLL_ALLGATHER_LONG` (total bytes, default 81920): allgathers of at least
    /// this many bytes use a ring; smaller ones recursive doubling (power-of-two sizes) or
    /// Bruck's algorithm.
    pub allgather_long: usize,
    /// `STEADFAST_COLL_ALLTOALL_SHORT` (bytes per block, default 256): alltoalls with blocks
    /// up to this size on at least 8 ranks use Bruck's algorithm.
    pub alltoall_short: usize,
    /// `STEADFAST_COLL_ALLTOALL_LONG` (bytes per block, default 32768): alltoalls with
    /// blocks of at least this size use pairwise exchange (n-1 rounds, one peer each);
    /// medium ones post every transfer at once.
    pub alltoall_long: usize,
    /// `STEADFAST_COLL_REDUCE_SCATTER_LONG` (total bytes, default 65536): reduce-scatters
    /// of at least this many bytes with a commutative op use pairwise exchange; others a
    /// reduce to rank 0 followed by a scatter.
    pub reduce_scatter_long: usize,
    /// `STEADFAST_COLL_BARRIER_TREE` (ranks, default 8): barriers on 3 up to this many ranks
    /// fan in to rank 0 and out again; larger (and 2-rank) ones use dissemination.
    pub barrier_tree: usize,
    /// `STEADFAST_COLL_REDUCE_LINEAR` (default 8): largest communicator whose Reduce of
    /// small vectors is linear.
    pub reduce_linear: usize,
    /// `STEADFAST_COLL_BCAST_LINEAR` (default 64): largest communicator on a host with more
    /// ranks than CPUs whose Bcast of small messages is linear.
    pub bcast_linear: usize,
    /// `STEADFAST_COLL_BCAST_LINEAR_LONG` (default 4): largest communicator on a host with
    /// more ranks than CPUs whose Bcast of [`BCAST_LINEAR_LONG_BYTES`] or more is linear
    /// rather than through the channels ([`bcast_linear_long`]); 0 turns it off.
    pub bcast_linear_long: usize,
    /// `STEADFAST_COLL_SCAN_LINEAR` (default 8): largest communicator whose Scan and Exscan
    /// of small vectors use the linear algorithm.
    pub scan_linear: usize,
    /// `STEADFAST_COLL_SCAN_SEGMENT` (bytes, default 65536; 0: whole vectors): the chained
    /// Scan and Exscan pass long vectors down the chain in segments of about this size.
    pub scan_segment: usize,
    /// `STEADFAST_COLL_CHANNEL_MIN` and `STEADFAST_COLL_CHANNEL_MAX` (bytes, default 12288
    /// and 1 MiB): broadcasts of this many bytes on a communicator whose ranks are all on
    /// one host use the shared-memory channels (where they beat the tree, see
    /// docs/collectives.md).
    pub channel_min: usize,
    pub channel_max: usize,
    /// `STEADFAST_COLL_CHANNELS` (default 16): channels per communicator segment.
    pub channels: u32,
    /// `STEADFAST_COLL_CHANNEL_SYNC` (default: half the channels; 0: all of them, the
    /// paper's delayed synchronization): broadcasts one synchronization releases; fewer
    /// than the channels start it while channels are still free.
    pub channel_sync: Option<u32>,
    /// `STEADFAST_COLL_CHANNEL_SLOT` (bytes, default 1 MiB): data capacity of a channel;
    /// larger broadcasts never use the channels. A segment is mapped at its full size but
    /// only the pages broadcasts write are ever backed, so a communicator that broadcasts
    /// only small messages costs a few pages per channel.
    pub channel_slot: usize,
    /// `STEADFAST_COLL_CHANNEL_CRC` (default 1): CRC32C on every channel frame.
    pub channel_crc: bool,
    /// `STEADFAST_COLL_CHANNEL_FAULTS`: fault hook of the channel writes (tests).
    pub channel_faults: Option<String>,
    /// `STEADFAST_COLL_SLOTS` (default on), `STEADFAST_COLL_SLOT_RANKS` (default 16),
    /// `STEADFAST_COLL_SLOT_BYTES` (default 2 MiB): the slot exchange on communicators whose
    /// ranks share memory, up to that many ranks and bytes of each rank's contribution.
    /// `STEADFAST_COLL_SLOT_RANKS_CROWDED` (default 64): the rank limit instead on a host
    /// that runs more ranks than it has CPUs.
    pub slots: bool,
    pub slot_ranks: usize,
    pub slot_ranks_crowded: usize,
    pub slot_bytes: usize,
    /// `STEADFAST_COLL_SLOT_FAULTS`: fault hook of the slot writes (tests).
    pub slot_faults: Option<String>,
    /// `STEADFAST_COLL_MCAST` (default `auto`): whether broadcasts on communicators that
    /// span hosts may use the channels over IP multicast: `auto` by the rule
    /// (`mcast_min..=mcast_max`), `on` for every size up to a channel's capacity, `off` never.
    pub mcast: Mcast,
    /// `STEADFAST_COLL_MCAST_MIN`, `STEADFAST_COLL_MCAST_MAX` (bytes): the rule's range.
    pub mcast_min: usize,
    pub mcast_max: usize,
    /// `STEADFAST_COLL_MCAST_GROUPS` (default `239.192.0.0/16`): the range a communicator's
    /// group address is drawn from.
    pub mcast_groups: String,
    /// `STEADFAST_COLL_MCAST_TTL` (default 1: the local network only).
    pub mcast_ttl: u32,
    /// `STEADFAST_COLL_MCAST_FRAGMENT` (bytes, default 8192): payload of one datagram.
    pub mcast_fragment: usize,
    /// `STEADFAST_COLL_FORCE`: comma-separated `collective=algorithm` pairs that override
    /// the rule, e.g. `bcast=binomial,allreduce=rabenseifner` (for tests and tuning).
    pub force: Vec<(String, String)>,
}

impl Default for CollConfig {
    fn default() -> Self {
        CollConfig {
            bcast_long: 12288,
            allreduce_long: 2048,
            reduce_long: 8192,
            allgather_long: 81920,
            alltoall_short: 256,
            alltoall_long: 32768,
            reduce_scatter_long: 65536,
            barrier_tree: 8,
            scan_linear: 8,
            scan_segment: 64 << 10,
            reduce_linear: 8,
            bcast_linear: 64,
            bcast_linear_long: 4,
            channel_min: 12288,
            channel_max: 1 << 20,
            channels: 16,
            channel_sync: None,
            channel_slot: 1 << 20,
            channel_crc: true,
            channel_faults: None,
            slots: true,
            slot_ranks: 16,
            slot_ranks_crowded: 64,
            slot_bytes: 2 << 20,
            slot_faults: None,
            mcast: Mcast::Auto,
            mcast_min: 12288,
            mcast_max: 65536,
            mcast_groups: "239.192.0.0/16".into(),
            mcast_ttl: 1,
            mcast_fragment: 8192,
            force: Vec::new(),
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    steadfast_config::parse_or(name, default, "a number of bytes")
}

impl CollConfig {
    /// Read the `STEADFAST_COLL_*` variables.
    pub fn from_env() -> CollConfig {
        let d = CollConfig::default();
        let force = steadfast_config::lookup("STEADFAST_COLL_FORCE")
            .unwrap_or_default()
            .split(',')
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase()))
            })
            .collect();
        CollConfig {
            bcast_long: env_usize("STEADFAST_COLL_BCAST_LONG", d.bcast_long),
            allreduce_long: env_usize("STEADFAST_COLL_ALLREDUCE_LONG", d.allreduce_long),
            reduce_long: env_usize("STEADFAST_COLL_REDUCE_LONG", d.reduce_long),
            allgather_long: env_usize("STEADFAST_COLL_ALLGATHER_LONG", d.allgather_long),
            alltoall_short: env_usize("STEADFAST_COLL_ALLTOALL_SHORT", d.alltoall_short),
            alltoall_long: env_usize("STEADFAST_COLL_ALLTOALL_LONG", d.alltoall_long),
            reduce_scatter_long: env_usize("STEADFAST_COLL_REDUCE_SCATTER_LONG", d.reduce_scatter_long),
            barrier_tree: steadfast_config::parse_or("STEADFAST_COLL_BARRIER_TREE", d.barrier_tree, "a number of ranks"),
            scan_linear: env_usize("STEADFAST_COLL_SCAN_LINEAR", d.scan_linear),
            scan_segment: env_usize("STEADFAST_COLL_SCAN_SEGMENT", d.scan_segment),
            reduce_linear: env_usize("STEADFAST_COLL_REDUCE_LINEAR", d.reduce_linear),
            bcast_linear: env_usize("STEADFAST_COLL_BCAST_LINEAR", d.bcast_linear),
            bcast_linear_long: env_usize("STEADFAST_COLL_BCAST_LINEAR_LONG", d.bcast_linear_long),
            channel_min: env_usize("STEADFAST_COLL_CHANNEL_MIN", d.channel_min),
            channel_max: env_usize("STEADFAST_COLL_CHANNEL_MAX", d.channel_max),
            channels: steadfast_config::parse_or("STEADFAST_COLL_CHANNELS", d.channels, "a number of channels").clamp(1, 1024),
            // Unset or not a number (warned about): half the channels.
            channel_sync: steadfast_config::lookup("STEADFAST_COLL_CHANNEL_SYNC")
                .map(|_| steadfast_config::parse_or("STEADFAST_COLL_CHANNEL_SYNC", u32::MAX, "a number of broadcasts"))
                .filter(|&v| v != u32::MAX),
            channel_slot: env_usize("STEADFAST_COLL_CHANNEL_SLOT", d.channel_slot).clamp(64, 1 << 30),
            channel_crc: steadfast_config::parse_or::<u32>("STEADFAST_COLL_CHANNEL_CRC", 1, "0 or 1") != 0,
            channel_faults: steadfast_config::lookup("STEADFAST_COLL_CHANNEL_FAULTS"),
            slots: steadfast_config::parse_or::<u32>("STEADFAST_COLL_SLOTS", 1, "0 or 1") != 0,
            slot_ranks: steadfast_config::parse_or("STEADFAST_COLL_SLOT_RANKS", d.slot_ranks, "a number of ranks").clamp(2, 4096),
            slot_ranks_crowded: steadfast_config::parse_or("STEADFAST_COLL_SLOT_RANKS_CROWDED", d.slot_ranks_crowded, "a number of ranks").clamp(2, 4096),
            slot_bytes: env_usize("STEADFAST_COLL_SLOT_BYTES", d.slot_bytes).clamp(0, 1 << 28),
            slot_faults: steadfast_config::lookup("STEADFAST_COLL_SLOT_FAULTS"),
            mcast: match steadfast_config::lookup("STEADFAST_COLL_MCAST").as_deref().map(str::trim) {
                Some("on" | "1") => Mcast::On,
                Some("off" | "0") => Mcast::Off,
                Some("auto" | "") | None => Mcast::Auto,
                Some(other) => {
                    tracing::warn!("STEADFAST_COLL_MCAST={other:?} is not auto, on or off; using auto");
                    Mcast::Auto
                }
            },
            mcast_min: env_usize("STEADFAST_COLL_MCAST_MIN", d.mcast_min),
            mcast_max: env_usize("STEADFAST_COLL_MCAST_MAX", d.mcast_max),
            mcast_groups: steadfast_config::lookup("STEADFAST_COLL_MCAST_GROUPS").unwrap_or(d.mcast_groups),
            mcast_ttl: steadfast_config::parse_or("STEADFAST_COLL_MCAST_TTL", d.mcast_ttl, "a hop count").clamp(0, 255),
            mcast_fragment: env_usize("STEADFAST_COLL_MCAST_FRAGMENT", d.mcast_fragment).clamp(512, 65000),
            force,
        }
    }

    fn forced(&self, coll: &str) -> Option<&str> {
        self.force.iter().find(|(k, _)| k == coll).map(|(_, v)| v.as_str())
    }
}

/// Barrier algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Barrier {
    /// ⌈log2 n⌉ rounds, every rank leaves at about the same time.
    Dissemination,
    /// Fan-in to rank 0 and fan-out from it: rank 0 leaves first.
    Tree,
    /// Flat fan-in to rank 0 and flat fan-out: two steps deep, rank 0 leaves first.
    Linear,
}

/// Choose the barrier algorithm for `size` ranks.
pub fn barrier(cfg: &CollConfig, size: i32) -> Barrier {
    match cfg.forced("barrier") {
        Some("dissemination") => return Barrier::Dissemination,
        Some("tree") => return Barrier::Tree,
        Some("linear") => return Barrier::Linear,
        _ => {}
    }
    // The dissemination barrier's ⌈log2 n⌉ steps are the fewest, but every rank leaves it at
    // about the same moment, so a broadcast or scatter from rank 0 right after it (a timing
    // loop, OSU's osu_bcast) makes every other rank wait a full message latency — a wake-up
    // when ranks outnumber CPUs: 8-byte MPI_Bcast after MPI_Barrier on 4 and 8 ranks on 2 CPUs
    // went from 20-1000 µs per rank to 0.2-0.9 µs. On few ranks the tree's extra ⌈log2 n⌉
    // steps cost little; 2 ranks gain nothing from it.
    // Of the two rank-0-first barriers the one with a flat fan-in is shallower (every rank
    // sends to rank 0 at once instead of waiting for its children): 4 ranks 5.1-7.3 µs
    // against 7.1-7.8 µs for the tree's, 8 ranks 17-19 µs against 19-23 µs, the broadcast
    // after it unchanged (docs/collectives.md).
    if size > 2 && size as usize <= cfg.barrier_tree {
        Barrier::Linear
    } else {
        Barrier::Dissemination
    }
}

/// Broadcast algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bcast {
    Binomial,
    /// The root sends to every rank itself.
    Linear,
    ScatterAllgather,
}

/// Largest broadcast the root sends to every rank itself on a crowded host
/// ([`bcast`]).
pub const BCAST_LINEAR_BYTES: usize = 8192;

/// Choose the broadcast algorithm for `bytes` bytes on `size` ranks. On a host that runs
/// more ranks than it has CPUs (`crowded`), small messages on up to
/// [`CollConfig::bcast_linear`] ranks go from the root to every rank: each rank then
/// waits for the root only, which a barrier before lets out first, not for a rank of the
/// tree to be scheduled and pass the message on (OSU-style, after `MPI_Barrier`, 2 CPUs,
/// 4 B-1 KiB: 8 ranks 0.27-0.90 µs against 1.2-3.2 by the tree, 4 ranks 0.18-0.57
/// against 0.23-0.84; 2-8 KiB on 8 ranks 1.5-2.5 against 2.4-6.1, level on 4; 4 B on 12,
/// 16, 24 and 32 ranks 0.3, 0.6-0.9, 0.8 and 1.2 µs against 2.7-3.3, 7-11, 19 and 33). Larger
/// ones use the binomial tree at every size: the scatter and the ring's n - 1 steps each
/// wait for a rank to be scheduled, where the tree's few large messages stream through
/// the rings. Measured OSU-style on 2 CPUs: MPI_Bcast of 4
/// MiB (above the channels) 4 ranks 470 µs against 725, 8 ranks 1836 against 2339;
/// MPI_Ibcast of 16 KiB (before it took the channels) 4 ranks 9.7 against 151, 8 ranks 25
/// against 427.
pub fn bcast(cfg: &CollConfig, size: i32, bytes: usize, crowded: bool) -> Bcast {
    // Scatter needs at least one byte per rank.
    let can_scatter = bytes >= size as usize && size > 2;
    match cfg.forced("bcast") {
        Some("binomial") => return Bcast::Binomial,
        Some("linear") => return Bcast::Linear,
        Some("scatter_allgather") if can_scatter => return Bcast::ScatterAllgather,
        _ => {}
    }
    if bcast_linear_long(cfg, size, bytes, crowded)
        || crowded && size > 2 && size as usize <= cfg.bcast_linear && bytes <= BCAST_LINEAR_BYTES
    {
        Bcast::Linear
    } else if can_scatter && size >= 4 && bytes >= cfg.bcast_long && !crowded {
        Bcast::ScatterAllgather
    } else {
        Bcast::Binomial
    }
}

/// Smallest broadcast that [`bcast_linear_long`] sends linearly.
pub const BCAST_LINEAR_LONG_BYTES: usize = 1 << 20;

/// Whether a broadcast of `bytes` bytes on `size` ranks of a crowded host goes from the
/// root to every rank instead of through the channels: from [`BCAST_LINEAR_LONG_BYTES`] on
/// up to [`CollConfig::bcast_linear_long`] ranks. A channel broadcast is read only once
/// its root wrote all of it, while the root's messages stream through the rings in 256
/// KiB records that each receiver copies out as they come; with few receivers the root's
/// extra copies cost less than that wait. OSU timing on 2 CPUs, medians of 5 alternating
/// runs (2026-12-02, an AMD Zen 4 guest), channels / linear / Open MPI, µs: 4 ranks 256 KiB
/// 39 / 34 / 36, 512 KiB 84 / 56 / 68, 1 MiB 196 / 100 / 242, 128 KiB 16 / 20 / 18; on 8
/// ranks the channels win at every size (1 MiB 184 / 373 / 309). On an AMD Zen 3 guest
/// (2026-12-03, medians of 6-10 alternating launches) the channels won up to 512 KiB: 4
/// ranks 256 KiB 33-34 / 55-64 / 40-41, 3 ranks 32 / 49 / 40; 512 KiB 67-92 / 76-112 / 74-79
/// (the channels ahead in two runs of three); 1 MiB 178 / 141 / 222. Hence linear from 1 MiB.
pub fn bcast_linear_long(cfg: &CollConfig, size: i32, bytes: usize, crowded: bool) -> bool {
    crowded && size > 2 && size as usize <= cfg.bcast_linear_long && bytes >= BCAST_LINEAR_LONG_BYTES
}

/// Broadcasts one synchronization of the channel broadcast releases (`Config::sync_every`):
/// `STEADFAST_COLL_CHANNEL_SYNC`, else half the channels (at least one). Measured in
/// docs/reproduction/channel-bcast.md: starting the synchronization at half the channels
/// keeps roots from waiting for it when calls are apart (8-byte broadcast timed the OSU
/// way, 4 ranks: 1.1 -> 0.21 us), and costs little when they come back to back.
pub fn channel_sync(cfg: &CollConfig) -> u32 {
    cfg.channel_sync.unwrap_or((cfg.channels / 2).max(1))
}

/// Whether a broadcast of `bytes` bytes on `size` ranks, all on this host, uses the
/// shared-memory channels (the caller checked the host and the fault-tolerance mode).
/// `bcast=channels` forces them up to a channel's capacity; forcing any other broadcast
/// algorithm turns them off.
/// Not on 2 ranks unless forced: a broadcast to one receiver is one message, and the
/// point-to-point copy, pipelined through the ring, beats the slot's two copies (OSU timing,
/// one CPU each: 16 KiB 0.78 µs against 1.15, 256 KiB 9.9 against 17.5, 1 MiB 29 against
/// 120; MPI_Ibcast 1 MiB 56 against 252).
/// On a crowded host (`crowded`) large broadcasts on few ranks are linear instead
/// ([`bcast_linear_long`]).
pub fn bcast_channels(cfg: &CollConfig, size: i32, bytes: usize, crowded: bool) -> bool {
    if size < 2 || bytes == 0 || bytes > cfg.channel_slot {
        return false;
    }
    match cfg.forced("bcast") {
        Some("channels") => true,
        Some(_) => false,
        None => size > 2 && (cfg.channel_min..=cfg.channel_max).contains(&bytes) && !bcast_linear_long(cfg, size, bytes, crowded),
    }
}

/// Allreduces use the slot exchange directly (every rank reduces every vector) while
/// bytes × ranks stay within this; above it, up to the slot's capacity, as a
/// Reduce_scatter_block and an Allgather through the slots ([`slots_allreduce_split`]).
/// Measured on 2 CPUs, OSU timing: the split wins from 32 KiB on 4 ranks (11 µs against
/// 12-18) and from 16 KiB on 8 (19.1-19.6 against 21.4-21.6); below, its second exchange
/// costs more than the reductions it saves.
pub const SLOT_ALLREDUCE_BYTES_RANKS: usize = 64 << 10;
/// Whether an Allreduce of `bytes` bytes and `count` elements on `size` ranks sharing memory,
/// too large for [`slots`], runs as a Reduce_scatter_block and an in-place Allgather through
/// the slots: when the vector fits the slot, the count splits into equal blocks and the rule
/// would take the exchange for those two calls (8 ranks, 1 MiB: 0.5 ms against 1.0 ms for
/// Open MPI and 1.7 ms for our Rabenseifner).
pub fn slots_allreduce_split(cfg: &CollConfig, size: i32, bytes: usize, count: usize, crowded: bool) -> bool {
    size > 2
        && count.is_multiple_of(size as usize)
        && cfg.forced("allreduce").is_none_or(|f| f == "slots")
        && cfg.slots
        && size as usize <= slot_ranks(cfg, crowded)
        && bytes <= cfg.slot_bytes
}

/// The most ranks the slot exchange serves: more where the host runs more ranks than it has
/// CPUs (`crowded`), where every round of messages waits for ranks to be scheduled and the
/// exchange has one. OSU-style on 2 CPUs, 4 bytes, exchange against messages: 24 ranks
/// Barrier 47 µs against 114 (Open MPI 81), Allreduce 43 against 103, Alltoall 45 against
/// 156; 32 ranks 69 against 169 (131), 67 against 171, 70 against 243.
fn slot_ranks(cfg: &CollConfig, crowded: bool) -> usize {
    if crowded {
        cfg.slot_ranks.max(cfg.slot_ranks_crowded)
    } else {
        cfg.slot_ranks
    }
}

/// On two ranks (one CPU each, nobody waits for a CPU) the messages' pipelined copies win
/// from 16 KiB: the slot exchange stops at this many bytes there.
pub const SLOT_TWO_RANKS_BYTES: usize = 8 << 10;

/// Whether blocking collective `coll` (`barrier`, `allreduce`, `allgather`, `alltoall`,
/// `reduce_scatter`) with `bytes` bytes of each rank's contribution on `size` ranks that all
/// share memory uses the slot exchange (the caller checked the sharing and the fault-tolerance
/// mode): up to `STEADFAST_COLL_SLOT_RANKS` ranks (`STEADFAST_COLL_SLOT_RANKS_CROWDED` on a
/// `crowded` host) and the slot's capacity, less for Allreduce and on two ranks (the
/// constants above). `STEADFAST_COLL_FORCE=coll=slots` takes it up to the slot's capacity
/// whatever the ranks; any other forced algorithm keeps it off.
pub fn slots(cfg: &CollConfig, coll: &str, size: i32, bytes: usize, crowded: bool) -> bool {
    if size < 2 || bytes > cfg.slot_bytes {
        return false;
    }
    match cfg.forced(coll) {
        Some("slots") => return true,
        Some(_) => return false,
        None => {}
    }
    let within = match coll {
        _ if size == 2 && bytes > SLOT_TWO_RANKS_BYTES => false,
        "allreduce" => bytes.saturating_mul(size as usize) <= SLOT_ALLREDUCE_BYTES_RANKS,
        _ => true,
    };
    cfg.slots && size as usize <= slot_ranks(cfg, crowded) && within
}

/// `STEADFAST_COLL_MCAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mcast {
    Auto,
    On,
    Off,
}

/// Largest broadcast the multicast stream carries, even forced: its datagram repair is
/// measured and tested up to here; the shared-memory channels on one host go further.
pub const MCAST_BYTES: usize = 64 << 10;

/// Whether a broadcast of `bytes` bytes on `size` ranks spread over several hosts uses the
/// channels over IP multicast (by default: at least 4 ranks, 12 KiB to 64 KiB) (the caller checked the fault-tolerance mode and that the
/// job has a network address). `STEADFAST_COLL_MCAST=on` or `bcast=channels` forces them
/// up to a channel's capacity or [`MCAST_BYTES`], whichever is smaller; `STEADFAST_COLL_MCAST=off` or forcing another broadcast
/// algorithm turns them off.
pub fn bcast_multicast(cfg: &CollConfig, size: i32, bytes: usize) -> bool {
    if size < 2 || bytes == 0 || bytes > cfg.channel_slot.min(MCAST_BYTES) || cfg.mcast == Mcast::Off {
        return false;
    }
    match cfg.forced("bcast") {
        Some("channels") => true,
        Some(_) => false,
        // Below 4 ranks the tree is one eager message per receiver, which measured faster
        // (docs/reproduction/channel-bcast.md, "Across hosts").
        None => cfg.mcast == Mcast::On || size >= 4 && (cfg.mcast_min..=cfg.mcast_max).contains(&bytes),
    }
}

/// Allreduce algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allreduce {
    RecursiveDoubling,
    Rabenseifner,
}

/// On two ranks recursive doubling is one exchange of the whole vector, Rabenseifner two of
/// its halves: the halves win only from here (OSU-style on 2 CPUs, medians of 5 launches,
/// Rabenseifner / recursive doubling: 16 KiB 4.65 / 3.36 µs, 64 KiB 11.9 / 11.0, 256 KiB
/// 38.5 / 40.3, 1 MiB 211 / 251).
pub const ALLREDUCE_LONG_TWO_RANKS: usize = 256 << 10;

/// Choose the allreduce algorithm.
pub fn allreduce(cfg: &CollConfig, size: i32, count: usize, bytes: usize, commutative: bool) -> Allreduce {
    let can_split = commutative && size > 1 && count >= super::pof2_floor(size) as usize;
    match cfg.forced("allreduce") {
        Some("recursive_doubling") => return Allreduce::RecursiveDoubling,
        Some("rabenseifner") if can_split => return Allreduce::Rabenseifner,
        _ => {}
    }
    let long = if size == 2 { cfg.allreduce_long.max(ALLREDUCE_LONG_TWO_RANKS) } else { cfg.allreduce_long };
    if can_split && bytes >= long {
        Allreduce::Rabenseifner
    } else {
        Allreduce::RecursiveDoubling
    }
}

/// Scan (and exscan) algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// log2 n rounds of pairwise exchanges: every rank waits for a partner in every round.
    RecursiveDoubling,
    /// Every rank sends its vector to every higher rank, then reduces what the lower ranks
    /// sent: n(n-1)/2 messages, but no rank waits for a rank that waits, and rank 0 not at all.
    Linear,
    /// Rank r takes the prefix of ranks 0..r-1 from rank r-1, adds its vector and passes the
    /// result to rank r+1: n-1 messages, one reduction per rank, each vector moves once.
    Chain,
}

/// Vectors up to this many bytes may take the linear scan.
pub const SCAN_LINEAR_BYTES: usize = 16 << 10;

/// On a crowded host, vectors up to this many bytes may take the linear scan; longer ones
/// go along the chain. The last rank of the linear scan receives n - 1 vectors, each a
/// message whose sender must be scheduled first; the chain moves each vector once. OSU
/// timing on 2 CPUs (fastest of 3 batches, medians of 3 alternating rounds, 2026-12-02), linear
/// against chain, 2 / 4 / 8 / 16 KiB: 8 ranks 9.9 / 16.0 / 27.4 / 42.4 µs against 15.1 /
/// 14.1 / 21.6 / 25.4; 4 ranks 2.3 / 2.9 / 7.2 / 11.9 against 3.3 / 4.9 / 6.6 / 8.5.
pub const SCAN_LINEAR_BYTES_CROWDED: usize = 4 << 10;

/// Choose the scan algorithm: linear up to `STEADFAST_COLL_SCAN_LINEAR` ranks (default 8)
/// for vectors up to [`SCAN_LINEAR_BYTES`], recursive doubling otherwise. Measured OSU-style
/// on 2 CPUs (docs/collectives.md): 4-byte scan on 4 ranks 0.6-2 µs linear against 6-20 µs by
/// recursive doubling, on 8 ranks 5-9 µs against 17-37 µs.
///
/// Longer vectors on a host that runs more ranks than it has CPUs (`crowded`,
/// [`super::Topo::crowded`]) go along the chain: recursive doubling exchanges whole vectors
/// both ways in every round and makes each rank reduce up to twice per round, and with
/// ranks waiting for CPUs those exchanges stall. Measured OSU-style on 2 CPUs (fastest of 3
/// batches, medians of 3 rounds), 64 KiB-1 MiB: recursive doubling 37-1208 µs on 4 ranks and
/// 137-2565 µs on 8, Open MPI (which uses the chain) 18-209 and 49-515 µs.
pub fn scan(cfg: &CollConfig, size: i32, bytes: usize, crowded: bool) -> Scan {
    match cfg.forced("scan") {
        Some("linear") => return Scan::Linear,
        Some("recursive_doubling") => return Scan::RecursiveDoubling,
        Some("chain") => return Scan::Chain,
        _ => {}
    }
    let linear_max = if crowded { SCAN_LINEAR_BYTES_CROWDED } else { SCAN_LINEAR_BYTES };
    if size as usize <= cfg.scan_linear && bytes <= linear_max {
        Scan::Linear
    } else if crowded {
        Scan::Chain
    } else {
        Scan::RecursiveDoubling
    }
}

/// Reduce algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    Binomial,
    ReduceScatterGather,
    /// Every other rank sends its vector to the root and returns; the root reduces them in
    /// rank order. No rank but the root waits.
    Linear,
}

/// Vectors up to this many bytes may take the linear reduce.
pub const REDUCE_LINEAR_BYTES: usize = 16 << 10;

/// Choose the reduce algorithm. On two ranks reduce-scatter + gather sends half the vector
/// each way and half back where the tree sends it once: the tree won at every size
/// (OSU-style on 2 CPUs, medians of 5 launches: 16 KiB 3.85 → 2.18 µs, 64 KiB 12.3 → 8.0,
/// 256 KiB 35.4 → 25.5, 1 MiB 183 → 152). `crowded` ([`super::Topo::crowded`]: one host running more
/// ranks than it has CPUs) keeps the binomial tree for long vectors too: reduce-scatter +
/// gather moves twice the data (2(n-1)/n of the vector per rank against at most one vector
/// per tree edge) to spread the reductions over ranks, which only pays with CPUs to spare.
/// Measured OSU-style on 2 CPUs, fastest of 3 batches, medians of 3 alternating rounds
/// (docs/collectives.md): 8 ranks, 16 KiB-1 MiB, binomial 9.3-310 µs against 23-692 µs by
/// reduce-scatter + gather (Open MPI 20.5-1189 µs); 4 ranks 8.0-234 µs against 13.3-412.
pub fn reduce(cfg: &CollConfig, size: i32, count: usize, bytes: usize, commutative: bool, crowded: bool) -> Reduce {
    let can_split = commutative && size > 1 && count >= super::pof2_floor(size) as usize;
    match cfg.forced("reduce") {
        Some("binomial") => return Reduce::Binomial,
        Some("reduce_scatter_gather") if can_split => return Reduce::ReduceScatterGather,
        Some("linear") => return Reduce::Linear,
        _ => {}
    }
    if can_split && size > 2 && bytes >= cfg.reduce_long && !crowded {
        Reduce::ReduceScatterGather
    } else if size as usize <= cfg.reduce_linear && bytes <= REDUCE_LINEAR_BYTES {
        Reduce::Linear
    } else {
        Reduce::Binomial
    }
}

/// Allgather algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allgather {
    RecursiveDoubling,
    Bruck,
    Ring,
}

/// Choose the allgather algorithm for `total` bytes gathered on `size` ranks.
pub fn allgather(cfg: &CollConfig, size: i32, total: usize) -> Allgather {
    let pof2 = size & (size - 1) == 0;
    match cfg.forced("allgather") {
        Some("ring") => return Allgather::Ring,
        Some("bruck") => return Allgather::Bruck,
        Some("recursive_doubling") if pof2 => return Allgather::RecursiveDoubling,
        _ => {}
    }
    if total >= cfg.allgather_long {
        Allgather::Ring
    } else if pof2 {
        Allgather::RecursiveDoubling
    } else {
        Allgather::Bruck
    }
}

/// Alltoall algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alltoall {
    /// Every transfer posted at once.
    Linear,
    /// n-1 rounds, one send and one receive each.
    Pairwise,
    /// ⌈log2 n⌉ rounds of packed blocks (uniform counts only).
    Bruck,
}

/// Choose the alltoall algorithm; `block` is the bytes per block when all blocks have the
/// same size (MPI_Alltoall), None for the v and w forms.
pub fn alltoall(cfg: &CollConfig, size: i32, block: Option<usize>) -> Alltoall {
    match cfg.forced("alltoall") {
        Some("linear") => return Alltoall::Linear,
        Some("pairwise") => return Alltoall::Pairwise,
        Some("bruck") if block.is_some() => return Alltoall::Bruck,
        _ => {}
    }
    match block {
        Some(b) if b <= cfg.alltoall_short && size >= 8 => Alltoall::Bruck,
        Some(b) if b >= cfg.alltoall_long => Alltoall::Pairwise,
        Some(_) => Alltoall::Linear,
        // Per-rank sizes differ, so the choice can only depend on the size.
        None if size > 16 => Alltoall::Pairwise,
        None => Alltoall::Linear,
    }
}

/// Whether an Alltoall of `block`-byte blocks on a crowded host whose single copy is fast
/// runs linear with every block read by its receiver, instead of the usual rule: from
/// 256 KiB. 1 MiB blocks on 2 CPUs (pairwise through the rings / linear with single copy,
/// Open MPI): 4 ranks 1.21 / 0.85-0.95 / 0.64 ms, 8 ranks 8.5-9.0 / 5.3-5.6 / 3.5-3.8 ms;
/// 256 KiB 4 ranks 242-246 / 210-216 µs, 8 ranks 956-962 / 830-854; at 64 KiB linear lost
/// on 8 ranks (263-345 against 234-249). A forced algorithm wins.
pub fn alltoall_single_copy(cfg: &CollConfig, block: usize) -> bool {
    cfg.forced("alltoall").is_none() && block >= ALLTOALL_SINGLE_COPY_MIN
}

const ALLTOALL_SINGLE_COPY_MIN: usize = 256 << 10;

/// Whether an Alltoall of `block`-byte blocks by messages on a crowded host (more ranks than
/// CPUs, no fast single copy) posts every transfer at once instead of pairwise: from 256 KiB
/// on up to 16 ranks. Pairwise, a rank waits in each round for one partner, which holds the
/// data until it is scheduled; with everything posted a scheduled rank moves whatever its
/// rings take. Measured on 2 CPUs (OSU timing, alternating rounds, four runs, pairwise /
/// linear): 1 MiB 4 ranks 1.01-1.19×, 8 ranks 1.05-1.15×; 16 ranks 256-512 KiB
/// 1.21-1.22×, 1 MiB 1.00; 8 ranks 512 KiB 1.02. Smaller blocks take the slot exchange on
/// these hosts. Open MPI stays ahead there (1.3-1.6×) by its single copy without a
/// checksum: linear with `STEADFAST_CHECKSUM=shm=none` and `STEADFAST_CMA=1` ran at
/// 0.88-0.96× Open MPI's time from 256 KiB on (1.65× with the checksum).
pub fn alltoall_linear_crowded(cfg: &CollConfig, size: i32, block: usize) -> bool {
    cfg.forced("alltoall").is_none() && size <= 16 && block >= ALLTOALL_SINGLE_COPY_MIN
}

/// How the receivers of a linear Scatter read the root's blocks above the eager limit: with a
/// single copy where the host runs more ranks than CPUs (the root would otherwise copy every
/// block into the rings while the receivers wait for it to be scheduled), elsewhere only
/// where this host's single copy is fast. 2 ranks on the AMD guest, whose single copy runs
/// at 8-9.5 GB/s (OSU timing, four alternating rounds, single copy / rings): 64 KiB 16.9 /
/// 6.4 µs, 256 KiB 55 / 22, 1 MiB 219 / 74 (Open MPI 10.8, 39, 154). Crowded, 8 ranks:
/// 64 KiB 42 / 60, 256 KiB 128 / 165, 1 MiB 541 / 710; 4 ranks 1.04-1.19 the other way.
/// On a crowded host with the shm checksum on, a block that fits the receiver's ring goes
/// eagerly all the same (`Engine::start_send`'s eager rule).
pub fn scatter_single_copy(crowded: bool) -> super::sched::SingleCopy {
    if crowded {
        super::sched::SingleCopy::Yes
    } else {
        super::sched::SingleCopy::WhereFast
    }
}

/// Whether a binomial Reduce of `bytes`-byte vectors on a crowded host whose single copy is
/// fast has each parent read its children's vectors with a single copy (the child then
/// needs no CPU time to hand its vector over, where it would copy it into the ring once
/// scheduled), from 128 KiB on. Measured on 2 CPUs, medians of 5-8 launches (through the
/// rings / single copy, all children at once): 4 ranks 128 KiB 74 / 28 µs, 256 KiB 70 / 52,
/// 1 MiB 394 / 343; 8 ranks 128 KiB 128 / 57, 256 KiB 171 / 141, 1 MiB 697 / 499; at 64 KiB
/// the single copy lost (4 ranks 13.6 / 17.6 µs). A forced algorithm wins.
pub fn reduce_single_copy(cfg: &CollConfig, bytes: usize) -> bool {
    cfg.forced("reduce").is_none() && bytes >= REDUCE_SINGLE_COPY_MIN
}

const REDUCE_SINGLE_COPY_MIN: usize = 128 << 10;

/// Reduce-scatter algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceScatter {
    /// Reduce to rank 0, then scatter (order-preserving).
    ReduceThenScatter,
    /// n-1 rounds; each rank accumulates its own block (commutative ops).
    Pairwise,
}

/// Choose the reduce-scatter algorithm for `total` bytes of input per rank.
pub fn reduce_scatter(cfg: &CollConfig, size: i32, total: usize, commutative: bool) -> ReduceScatter {
    match cfg.forced("reduce_scatter") {
        Some("reduce_then_scatter") => return ReduceScatter::ReduceThenScatter,
        Some("pairwise") if commutative => return ReduceScatter::Pairwise,
        _ => {}
    }
    if commutative && size > 1 && total >= cfg.reduce_scatter_long {
        ReduceScatter::Pairwise
    } else {
        ReduceScatter::ReduceThenScatter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_documented_rule() {
        let c = CollConfig::default();
        assert_eq!(bcast(&c, 4, 8, false), Bcast::Binomial);
        assert_eq!(bcast(&c, 4, 1 << 20, false), Bcast::ScatterAllgather);
        assert_eq!(bcast(&c, 4, 1 << 20, true), Bcast::Linear);
        assert_eq!(bcast(&c, 4, (1 << 20) - 1, true), Bcast::Binomial);
        assert_eq!(bcast(&c, 8, 1 << 20, true), Bcast::Binomial);
        assert_eq!(bcast(&c, 2, 1 << 20, false), Bcast::Binomial);
        // Scan: linear up to 16 KiB, 4 KiB on a crowded host, then the chain there.
        assert_eq!(scan(&c, 8, 16 << 10, false), Scan::Linear);
        assert_eq!(scan(&c, 8, 16 << 10, true), Scan::Chain);
        assert_eq!(scan(&c, 8, 4 << 10, true), Scan::Linear);
        assert_eq!(scan(&c, 9, 8, true), Scan::Chain);
        assert_eq!(scan(&c, 8, (16 << 10) + 1, false), Scan::RecursiveDoubling);
        // A crowded host: the root sends small messages to each of up to 64 ranks itself.
        assert_eq!(bcast(&c, 8, 8, true), Bcast::Linear);
        assert_eq!(bcast(&c, 4, BCAST_LINEAR_BYTES, true), Bcast::Linear);
        assert_eq!(bcast(&c, 4, BCAST_LINEAR_BYTES + 1, true), Bcast::Binomial);
        assert_eq!(bcast(&c, 64, 8, true), Bcast::Linear);
        assert_eq!(bcast(&c, 65, 8, true), Bcast::Binomial);
        assert_eq!(bcast(&c, 2, 8, true), Bcast::Binomial);
        assert_eq!(allreduce(&c, 4, 1, 8, true), Allreduce::RecursiveDoubling);
        assert_eq!(allreduce(&c, 4, 1 << 16, 1 << 19, true), Allreduce::Rabenseifner);
        assert_eq!(allreduce(&c, 4, 1 << 16, 1 << 19, false), Allreduce::RecursiveDoubling);
        assert_eq!(allreduce(&c, 5, 3, 1 << 19, true), Allreduce::RecursiveDoubling);
        assert_eq!(reduce(&c, 8, 1 << 18, 1 << 20, true, false), Reduce::ReduceScatterGather);
        // More ranks than CPUs on one host: the tree moves half the data.
        assert_eq!(reduce(&c, 8, 1 << 18, 1 << 20, true, true), Reduce::Binomial);
        assert_eq!(reduce(&c, 4, 16, 64, true, true), Reduce::Linear);
        // Two ranks: the tree sends the vector once, the split sends one and a half.
        assert_eq!(reduce(&c, 2, 1 << 18, 1 << 20, true, false), Reduce::Binomial);
        assert_eq!(allreduce(&c, 2, 1 << 14, 1 << 16, true), Allreduce::RecursiveDoubling);
        assert_eq!(allreduce(&c, 2, 1 << 16, 1 << 18, true), Allreduce::Rabenseifner);
        assert_eq!(allreduce(&c, 4, 1 << 10, 1 << 12, true), Allreduce::Rabenseifner);
        assert_eq!(allgather(&c, 4, 64), Allgather::RecursiveDoubling);
        assert_eq!(allgather(&c, 5, 64), Allgather::Bruck);
        assert_eq!(allgather(&c, 5, 1 << 20), Allgather::Ring);
        assert_eq!(alltoall(&c, 8, Some(8)), Alltoall::Bruck);
        assert_eq!(alltoall(&c, 4, Some(8)), Alltoall::Linear);
        assert_eq!(alltoall(&c, 4, Some(1 << 20)), Alltoall::Pairwise);
        assert!(alltoall_linear_crowded(&c, 4, 1 << 20));
        assert!(alltoall_linear_crowded(&c, 16, 256 << 10));
        assert!(!alltoall_linear_crowded(&c, 17, 1 << 20));
        assert!(!alltoall_linear_crowded(&c, 8, (256 << 10) - 1));
        assert_eq!(reduce_scatter(&c, 4, 1 << 20, false), ReduceScatter::ReduceThenScatter);
        assert!(!bcast_channels(&c, 4, 8, false));
        assert!(!bcast_channels(&c, 4, 12287, false));
        assert!(bcast_channels(&c, 4, 12288, false));
        assert!(bcast_channels(&c, 8, 65536, false));
        assert!(bcast_channels(&c, 8, 1 << 20, false));
        assert!(!bcast_channels(&c, 8, (1 << 20) + 1, false));
        assert!(!bcast_channels(&c, 1, 8, false));
        assert!(!bcast_channels(&c, 2, 65536, false));
        assert!(bcast_channels(&CollConfig { force: vec![("bcast".into(), "channels".into())], ..Default::default() }, 2, 65536, false));
        assert!(!bcast_channels(&c, 4, 0, false));
        // A crowded host: large broadcasts on up to 4 ranks are linear, not channels.
        assert!(bcast_channels(&c, 4, 256 << 10, true));
        assert!(bcast_channels(&c, 4, (1 << 20) - 1, true));
        assert!(!bcast_channels(&c, 4, 1 << 20, true));
        assert_eq!(bcast(&c, 4, 1 << 20, true), Bcast::Linear);
        assert_eq!(bcast(&c, 3, 1 << 20, true), Bcast::Linear);
        assert!(bcast_channels(&c, 8, 1 << 20, true));
        assert_eq!(bcast(&c, 4, 1 << 20, false), Bcast::ScatterAllgather);
        let off = CollConfig { bcast_linear_long: 0, ..Default::default() };
        assert!(bcast_channels(&off, 4, 1 << 20, true));
    }

    #[test]
    fn forcing_respects_what_an_algorithm_can_do() {
        let c = CollConfig { force: vec![("allreduce".into(), "rabenseifner".into())], ..Default::default() };
        assert_eq!(allreduce(&c, 4, 8, 64, true), Allreduce::Rabenseifner);
        // Not commutative: forcing cannot make the split algorithm correct.
        assert_eq!(allreduce(&c, 4, 8, 64, false), Allreduce::RecursiveDoubling);
        assert!(bcast_multicast(&c, 4, 65536));
        assert!(!bcast_multicast(&c, 4, 8));
        assert!(!bcast_multicast(&c, 3, 65536));
        assert!(bcast_multicast(&CollConfig { mcast: Mcast::On, ..Default::default() }, 2, 8));
        assert!(!bcast_multicast(&CollConfig { mcast: Mcast::Off, ..Default::default() }, 4, 65536));
        assert!(!bcast_multicast(&CollConfig { mcast: Mcast::On, ..Default::default() }, 4, 65537));
        let tree = CollConfig { force: vec![("bcast".into(), "binomial".into())], mcast: Mcast::On, ..Default::default() };
        assert!(!bcast_multicast(&tree, 4, 8));
        let on = CollConfig { force: vec![("bcast".into(), "channels".into())], ..Default::default() };
        assert!(bcast_multicast(&on, 4, 8));
        assert!(bcast_channels(&on, 4, 1 << 20, false));
        assert!(!bcast_channels(&on, 4, (1 << 20) + 1, false));
        assert!(!bcast_multicast(&on, 4, 65537));
        let off = CollConfig { force: vec![("bcast".into(), "binomial".into())], ..Default::default() };
        assert!(!bcast_channels(&off, 4, 8, false));
    }

    #[test]
    fn slot_rule_limits_by_collective_ranks_and_capacity() {
        let c = CollConfig::default();
        assert!(slots(&c, "barrier", 8, 0, false));
        assert!(slots(&c, "allgather", 8, 2 << 20, false));
        assert!(!slots(&c, "allgather", 8, (2 << 20) + 1, false));
        assert!(slots(&c, "allreduce", 8, 8 << 10, false));
        assert!(!slots(&c, "allreduce", 8, 16 << 10, false));
        assert!(slots_allreduce_split(&c, 8, 16 << 10, 2048, false));
        assert!(!slots_allreduce_split(&c, 8, 16 << 10, 2047, false));
        assert!(slots_allreduce_split(&c, 4, 2 << 20, 1 << 19, false));
        assert!(!slots_allreduce_split(&c, 4, (2 << 20) + 8, (1 << 19) + 2, false));
        assert!(!slots_allreduce_split(&c, 2, 64 << 10, 1 << 14, false));
        let forced = CollConfig { force: vec![("allreduce".into(), "rabenseifner".into())], ..Default::default() };
        assert!(!slots_allreduce_split(&forced, 8, 1 << 20, 1 << 18, false));
        assert!(slots(&c, "alltoall", 8, 2 << 20, false));
        assert!(!slots(&c, "alltoall", 8, (2 << 20) + 1, false));
        assert!(slots(&c, "reduce_scatter", 2, 8 << 10, false));
        assert!(!slots(&c, "reduce_scatter", 2, 16 << 10, false));
        assert!(!slots(&c, "barrier", 17, 0, false));
        assert!(!slots(&c, "barrier", 1, 0, false));
        assert!(!slots(&CollConfig { slots: false, ..Default::default() }, "barrier", 4, 0, false));
        let forced = CollConfig { force: vec![("allreduce".into(), "slots".into())], slots: false, ..Default::default() };
        assert!(slots(&forced, "allreduce", 64, 1 << 20, false));
        let other = CollConfig { force: vec![("barrier".into(), "linear".into())], ..Default::default() };
        assert!(!slots(&other, "barrier", 4, 0, false));
        // A crowded host: up to 64 ranks.
        assert!(slots(&c, "barrier", 64, 0, true));
        assert!(!slots(&c, "barrier", 65, 0, true));
        assert!(slots(&c, "allreduce", 32, 2 << 10, true));
        assert!(!slots(&c, "allreduce", 32, 4 << 10, true));
        assert!(slots_allreduce_split(&c, 32, 64 << 10, 1 << 14, true));
        assert!(!slots_allreduce_split(&c, 32, 64 << 10, 1 << 14, false));
    }
}
