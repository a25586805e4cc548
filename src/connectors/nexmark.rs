//! A deterministic generator of the Nexmark benchmark's event stream: people registering,
//! auctions opening and bids arriving at an online auction site.
//!
//! The model is the one of Tucker, Tufte, Papadimos and Maier, "NEXMark – A Benchmark for
//! Queries over Data Streams" (2002), in the form the Flink and Beam Nexmark suites generate
//! it: one stream of numbered events, `0, 1, 2, ...`, of which in every run of
//! [`TOTAL_PROPORTION`] = 50 consecutive events the first [`PERSON_PROPORTION`] = 1 is a
//! [`Person`], the next [`AUCTION_PROPORTION`] = 3 are [`Auction`]s and the remaining
//! [`BID_PROPORTION`] = 46 are [`Bid`]s. Event `n` happens at
//! `BASE_TIME_MS + trunc(n * 1e6 / event_rate) / 1000` milliseconds (event time, in order, no
//! out-of-order groups). Ids grow with the event number, so a bid only refers to people and
//! auctions that already exist (or are about to: the id leads), and most bids go to a few hot
//! auctions, bidders and channels.
//!
//! Unlike the Java generators, which draw from a seeded sequential random generator, every
//! random value here is a pure function of `(seed, event number, draw index)`: a splitmix64
//! finaliser ([`mix64`]) applied to a counter ([`draw`]). Any event can therefore be made
//! without making the ones before it, which is what lets a source resume at any offset in
//! constant time and makes the rows identical across runs, machines and batch sizes. The
//! arithmetic is the same as the reference Python generator `nexmark_gen.py`'s, which the
//! `nexmark_gen` integration test checks row for row through the CSV form
//! ([`write_bid_csv`], [`write_person_csv`], [`write_auction_csv`]).
//!
//! Layers: [`NexmarkModel`] makes single events and Arrow batches of one table;
//! [`NexmarkGenerator`] serves one table's rows for a range of event offsets, the shape a
//! replayable source needs.

use std::fmt;
use std::hint::black_box;
use std::io::{self, Write};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringBuilder, TimestampNanosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

// ---- the model's constants ----------------------------------------------------------------

/// Persons in every [`TOTAL_PROPORTION`] events (they come first in each group).
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions in every [`TOTAL_PROPORTION`] events (they follow the persons).
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids in every [`TOTAL_PROPORTION`] events (the rest of each group).
pub const BID_PROPORTION: u64 = 46;
/// Length of the repeating group of events: persons, then auctions, then bids.
pub const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;

/// Id of the first person; person ids are consecutive from here.
pub const FIRST_PERSON_ID: i64 = 1000;
/// Id of the first auction; auction ids are consecutive from here.
pub const FIRST_AUCTION_ID: i64 = 1000;
/// The smallest auction category.
pub const FIRST_CATEGORY_ID: i64 = 10;
/// Auction categories: `FIRST_CATEGORY_ID .. FIRST_CATEGORY_ID + NUM_CATEGORIES`.
pub const NUM_CATEGORIES: u64 = 5;

/// A cold bidder or seller is one of the newest this many people (plus [`PERSON_ID_LEAD`]).
pub const NUM_ACTIVE_PEOPLE: i64 = 1000;
/// A cold bid goes to one of the newest this many auctions (plus [`AUCTION_ID_LEAD`]).
pub const NUM_IN_FLIGHT_AUCTIONS: i64 = 100;
/// How far past the newest person a cold bidder or seller id may reach.
pub const PERSON_ID_LEAD: i64 = 10;
/// How far past the newest auction a cold bid's auction id may reach.
pub const AUCTION_ID_LEAD: i64 = 10;

/// A bid goes to the hot auction with probability `1 - 1 / HOT_AUCTION_RATIO` (1/2).
pub const HOT_AUCTION_RATIO: u64 = 2;
/// A bid comes from the hot bidder with probability `1 - 1 / HOT_BIDDERS_RATIO` (3/4).
pub const HOT_BIDDERS_RATIO: u64 = 4;
/// An auction is opened by the hot seller with probability `1 - 1 / HOT_SELLERS_RATIO` (3/4).
pub const HOT_SELLERS_RATIO: u64 = 4;
/// The hot auction, bidder and seller are the newest id rounded down to a multiple of this
/// (the Java generators call it `HOT_AUCTION_RATIO` etc. inside their per-table classes).
pub const HOT_ID_STRIDE: i64 = 100;
/// A bid comes through one of the [`HOT_CHANNELS`] with probability `1 - 1 / 2`.
pub const HOT_CHANNELS_RATIO: u64 = 2;
/// Cold channels: `channel-0 .. channel-9999`.
pub const CHANNELS_NUMBER: u64 = 10_000;
/// The hot channels, each with one fixed url.
pub const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];

/// Target size of a person row in bytes; `extra` pads a row towards it.
pub const AVG_PERSON_BYTE_SIZE: i64 = 200;
/// Target size of an auction row in bytes; `extra` pads a row towards it.
pub const AVG_AUCTION_BYTE_SIZE: i64 = 500;
/// Target size of a bid row in bytes; `extra` pads a row towards it.
pub const AVG_BID_BYTE_SIZE: i64 = 100;

/// Event time of event 0: 2015-07-15 00:00:00 UTC, in milliseconds since the Unix epoch.
pub const BASE_TIME_MS: i64 = 1_436_918_400_000;
/// Default seed of the draws.
pub const DEFAULT_SEED: u64 = 42;
/// Default event rate: events of all kinds per second of event time.
pub const DEFAULT_EVENT_RATE: f64 = 10_000.0;

/// The states of person rows.
pub const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
/// The cities of person rows.
pub const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
/// First names of person rows.
pub const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
/// Last names of person rows.
pub const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];

// ---- counter-based draws ------------------------------------------------------------------

/// Multiplier of the event number in a draw's counter (the splitmix64 increment).
const EVENT_STRIDE: u64 = 0x9E37_79B9_7F4A_7C15;
/// Multiplier of the draw index in a draw's counter.
const DRAW_STRIDE: u64 = 0xD1B5_4A32_D192_ED03;

// Draw indices of a bid.
const D_AUCTION_HOT: u64 = 0;
const D_AUCTION: u64 = 1;
const D_BIDDER_HOT: u64 = 2;
const D_BIDDER: u64 = 3;
const D_PRICE: u64 = 4;
const D_CHANNEL_HOT: u64 = 5;
const D_CHANNEL: u64 = 6;
const D_EXTRA_LEN: u64 = 7;
const D_EXTRA_WORDS: u64 = 8;
/// Letters made from one 64-bit draw.
const LETTERS_PER_WORD: usize = 12;
/// Draws of a bid's `extra` letters.
const BID_EXTRA_WORDS: usize = 7;
/// The most letters a bid's `extra` has room for.
pub const BID_EXTRA_MAX: usize = BID_EXTRA_WORDS * LETTERS_PER_WORD;
/// Urls of the hot channels are drawn as if for channels `URL_STREAM + i`.
const URL_STREAM: u64 = 1 << 40;
/// Draw index that decides whether a cold channel's url carries a `channel_id`.
const D_CHANNEL_ID: u64 = 999;

/// The splitmix64 finaliser: a bijection of `u64` that spreads every input bit over the
/// output. `mix64(0) == 0`.
pub fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Draw number `k` of event `n` under `seed`: `mix64(seed + n * φ + k * c)` with wrapping
/// arithmetic, φ the 64-bit golden ratio. Every random choice of the model is one draw.
pub fn draw(seed: u64, n: u64, k: u64) -> u64 {
    mix64(
        seed.wrapping_add(n.wrapping_mul(EVENT_STRIDE))
            .wrapping_add(k.wrapping_mul(DRAW_STRIDE)),
    )
}

/// An integer in `[0, bound)` from a draw: its 53 high bits modulo `bound` (`bound > 0`).
fn below(z: u64, bound: u64) -> u64 {
    (z >> 11) % bound
}

/// A double in `[0, 1)` from a draw's 53 high bits.
fn unit_double(z: u64) -> f64 {
    (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A price in cents from a draw: `floor(10^(6u) * 100 + 0.5)` (Java's `Math.round`) for `u`
/// the draw's 53 high bits as a fraction in `[0, 1)`, so log-uniform between 1.00 and
/// 1,000,000.00.
///
/// The power goes through the C library's `pow`, as the reference generator's does. The base
/// is hidden from the optimiser so that `pow(10, x)` can never be rewritten into `exp10(x)`,
/// a different function whose last bit may differ (LLVM knows that rewrite; today's rustc
/// does not apply it, and a result one ulp off would change a price now and then).
pub fn price_from_draw(z: u64) -> i64 {
    let ten: f64 = black_box(10.0);
    (ten.powf(unit_double(z) * 6.0) * 100.0 + 0.5).floor() as i64
}

/// `count` lowercase letters from one draw, least significant base-26 digit first.
fn push_letters(mut z: u64, count: usize, out: &mut impl Extend<u8>) {
    out.extend((0..count).map(|_| {
        let c = b'a' + (z % 26) as u8;
        z /= 26;
        c
    }));
}

/// Nexmark's short random string: 3 to `max_len - 1` characters, each `special` with
/// probability 1/13 and otherwise a lowercase letter; trimmed of spaces at both ends when
/// `special` is a space. Uses draws `k ..= k + length` of event `n`.
fn small_string(seed: u64, n: u64, k: u64, max_len: u64, special: u8) -> String {
    let len = 3 + below(draw(seed, n, k), max_len - 3);
    let bytes: Vec<u8> = (0..len)
        .map(|j| {
            let z = draw(seed, n, k + 1 + j);
            if below(z, 13) == 0 {
                special
            } else {
                b'a' + ((z >> 32) % 26) as u8
            }
        })
        .collect();
    let s = String::from_utf8(bytes).expect("ASCII");
    if special == b' ' {
        s.trim_matches(' ').to_string()
    } else {
        s
    }
}

/// Padding letters for a row whose other fields take `current` bytes, towards `avg` bytes:
/// `want = avg - current` letters, give or take 20%, from draws `k0 ..` of event `n`. Empty
/// when the row is already larger than `avg`.
fn extra_letters(seed: u64, n: u64, current: i64, avg: i64, k0: u64) -> String {
    if current > avg {
        return String::new();
    }
    let want = avg - current;
    let delta = (want as f64 * 0.2).round_ties_even() as i64;
    let size = if delta > 0 {
        want - delta + below(draw(seed, n, k0), 2 * delta as u64) as i64
    } else {
        want
    };
    let size = size as usize;
    let words = size.div_ceil(LETTERS_PER_WORD);
    let mut out = Vec::with_capacity(words * LETTERS_PER_WORD);
    for w in 0..words {
        push_letters(draw(seed, n, k0 + 1 + w as u64), LETTERS_PER_WORD, &mut out);
    }
    out.truncate(size);
    String::from_utf8(out).expect("ASCII")
}

// ---- event numbers ------------------------------------------------------------------------

/// The table an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NexmarkTable {
    /// `person`: people registering to buy or sell.
    Person,
    /// `auction`: items put up for auction.
    Auction,
    /// `bid`: bids on auctions.
    Bid,
}

/// Whether event `n` is a person (the first event of every group of 50).
pub fn is_person(n: u64) -> bool {
    n % TOTAL_PROPORTION < PERSON_PROPORTION
}

/// Whether event `n` is an auction (events 1 to 3 of every group of 50).
pub fn is_auction(n: u64) -> bool {
    let off = n % TOTAL_PROPORTION;
    (PERSON_PROPORTION..PERSON_PROPORTION + AUCTION_PROPORTION).contains(&off)
}

/// Whether event `n` is a bid (events 4 to 49 of every group of 50).
pub fn is_bid(n: u64) -> bool {
    n % TOTAL_PROPORTION >= PERSON_PROPORTION + AUCTION_PROPORTION
}

/// Event number of the `i`-th bid (0-based): `bid_event_number(0) == 4`,
/// `bid_event_number(46) == 54`.
pub fn bid_event_number(i: u64) -> u64 {
    (i / BID_PROPORTION) * TOTAL_PROPORTION
        + PERSON_PROPORTION
        + AUCTION_PROPORTION
        + i % BID_PROPORTION
}

/// Event number of the `i`-th person (0-based): the first event of group `i`, as there is
/// one person per group.
pub fn person_event_number(i: u64) -> u64 {
    const { assert!(PERSON_PROPORTION == 1) };
    i * TOTAL_PROPORTION
}

/// Event number of the `i`-th auction (0-based).
pub fn auction_event_number(i: u64) -> u64 {
    (i / AUCTION_PROPORTION) * TOTAL_PROPORTION + PERSON_PROPORTION + i % AUCTION_PROPORTION
}

/// Number of bids among events `0 .. e`.
pub fn bids_before(e: u64) -> u64 {
    (e / TOTAL_PROPORTION) * BID_PROPORTION
        + (e % TOTAL_PROPORTION).saturating_sub(PERSON_PROPORTION + AUCTION_PROPORTION)
}

/// Number of persons among events `0 .. e`.
pub fn persons_before(e: u64) -> u64 {
    (e / TOTAL_PROPORTION) * PERSON_PROPORTION + (e % TOTAL_PROPORTION).min(PERSON_PROPORTION)
}

/// Number of auctions among events `0 .. e`.
pub fn auctions_before(e: u64) -> u64 {
    (e / TOTAL_PROPORTION) * AUCTION_PROPORTION
        + (e % TOTAL_PROPORTION)
            .saturating_sub(PERSON_PROPORTION)
            .min(AUCTION_PROPORTION)
}

/// The number of events up to and including the `bids`-th bid: the event count a source
/// must produce so that its bid table has `bids` rows (0 for 0 bids).
pub fn events_for_bids(bids: u64) -> u64 {
    if bids == 0 {
        0
    } else {
        bid_event_number(bids - 1) + 1
    }
}

impl NexmarkTable {
    /// The table of event `n`.
    pub fn of_event(n: u64) -> Self {
        if is_person(n) {
            NexmarkTable::Person
        } else if is_auction(n) {
            NexmarkTable::Auction
        } else {
            NexmarkTable::Bid
        }
    }

    /// The table's name: `person`, `auction` or `bid`.
    pub fn name(self) -> &'static str {
        match self {
            NexmarkTable::Person => "person",
            NexmarkTable::Auction => "auction",
            NexmarkTable::Bid => "bid",
        }
    }

    /// Event number of this table's `i`-th row (0-based).
    pub fn event_number(self, i: u64) -> u64 {
        match self {
            NexmarkTable::Person => person_event_number(i),
            NexmarkTable::Auction => auction_event_number(i),
            NexmarkTable::Bid => bid_event_number(i),
        }
    }

    /// Rows of this table among events `0 .. e`.
    pub fn rows_before(self, e: u64) -> u64 {
        match self {
            NexmarkTable::Person => persons_before(e),
            NexmarkTable::Auction => auctions_before(e),
            NexmarkTable::Bid => bids_before(e),
        }
    }

    /// The table's Arrow schema, the one `CREATE TABLE` gives its SQL definition in Weir:
    /// `BIGINT` is `Int64`, `VARCHAR` is `Utf8`, `TIMESTAMP` is `Timestamp(Nanosecond, None)`
    /// (UTC), all columns nullable.
    ///
    /// ```sql
    /// CREATE TABLE person (id BIGINT, name VARCHAR, email_address VARCHAR,
    ///     credit_card VARCHAR, city VARCHAR, state VARCHAR, date_time TIMESTAMP,
    ///     extra VARCHAR);
    /// CREATE TABLE auction (id BIGINT, item_name VARCHAR, description VARCHAR,
    ///     initial_bid BIGINT, reserve BIGINT, date_time TIMESTAMP, expires TIMESTAMP,
    ///     seller BIGINT, category BIGINT, extra VARCHAR);
    /// CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR,
    ///     url VARCHAR, date_time TIMESTAMP, extra VARCHAR);
    /// ```
    pub fn schema(self) -> SchemaRef {
        let int = |name: &str| Field::new(name, DataType::Int64, true);
        let text = |name: &str| Field::new(name, DataType::Utf8, true);
        let time =
            |name: &str| Field::new(name, DataType::Timestamp(TimeUnit::Nanosecond, None), true);
        let fields = match self {
            NexmarkTable::Person => vec![
                int("id"),
                text("name"),
                text("email_address"),
                text("credit_card"),
                text("city"),
                text("state"),
                time("date_time"),
                text("extra"),
            ],
            NexmarkTable::Auction => vec![
                int("id"),
                text("item_name"),
                text("description"),
                int("initial_bid"),
                int("reserve"),
                time("date_time"),
                time("expires"),
                int("seller"),
                int("category"),
                text("extra"),
            ],
            NexmarkTable::Bid => vec![
                int("auction"),
                int("bidder"),
                int("price"),
                text("channel"),
                text("url"),
                time("date_time"),
                text("extra"),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// The newest person among events `0 ..= n`, as a 0-based id (Java's `lastBase0PersonId`).
/// Event 0 is the first person, so this is never negative; with one person per group, it is
/// the group number.
pub fn last_base0_person_id(n: u64) -> i64 {
    const { assert!(PERSON_PROPORTION == 1) };
    (n / TOTAL_PROPORTION) as i64
}

/// The newest auction among events `0 ..= n`, as a 0-based id (Java's `lastBase0AuctionId`);
/// `-1` for event 0, before the first auction.
pub fn last_base0_auction_id(n: u64) -> i64 {
    let mut epoch = (n / TOTAL_PROPORTION) as i64;
    let mut off = (n % TOTAL_PROPORTION) as i64;
    let (persons, auctions) = (PERSON_PROPORTION as i64, AUCTION_PROPORTION as i64);
    if off < persons {
        epoch -= 1;
        off = auctions - 1;
    } else if off >= persons + auctions {
        off = auctions - 1;
    } else {
        off -= persons;
    }
    epoch * auctions + off
}

/// Event time of event `n` in milliseconds since the Unix epoch (UTC), at `event_rate` events
/// per second: `BASE_TIME_MS + trunc(n * (1e6 / event_rate)) / 1000`, the product in `f64`
/// microseconds as in the Java generators.
pub fn timestamp_ms(n: u64, event_rate: f64) -> i64 {
    let delay_us = 1_000_000.0 / event_rate;
    BASE_TIME_MS.saturating_add(((n as f64 * delay_us) as i64).div_euclid(1000))
}

// ---- rows ---------------------------------------------------------------------------------

/// A bid's `extra` column: lowercase padding letters, kept inline (at most
/// [`BID_EXTRA_MAX`] bytes) so that making a bid does not allocate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BidExtra {
    len: u8,
    bytes: [u8; BID_EXTRA_MAX],
}

impl BidExtra {
    /// The letters.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).expect("ASCII")
    }
}

impl fmt::Debug for BidExtra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for BidExtra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A row of `bid`. Strings of the channel table are borrowed from the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bid<'t> {
    /// Id of the auction bid on.
    pub auction: i64,
    /// Id of the bidding person.
    pub bidder: i64,
    /// Price in cents.
    pub price: i64,
    /// Channel the bid came through: one of [`HOT_CHANNELS`] or `channel-<k>`.
    pub channel: &'t str,
    /// The channel's url.
    pub url: &'t str,
    /// Event time, milliseconds since the Unix epoch (UTC).
    pub date_time: i64,
    /// Padding letters (54 to 81 of them).
    pub extra: BidExtra,
}

/// A row of `person`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    /// Person id, consecutive from [`FIRST_PERSON_ID`].
    pub id: i64,
    /// First and last name.
    pub name: String,
    /// `<letters>@<letters>.com`.
    pub email_address: String,
    /// Four groups of four digits.
    pub credit_card: String,
    /// One of [`US_CITIES`].
    pub city: &'static str,
    /// One of [`US_STATES`].
    pub state: &'static str,
    /// Event time, milliseconds since the Unix epoch (UTC).
    pub date_time: i64,
    /// Padding letters.
    pub extra: String,
}

/// A row of `auction`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Auction {
    /// Auction id, consecutive from [`FIRST_AUCTION_ID`].
    pub id: i64,
    /// Item name: letters and spaces.
    pub item_name: String,
    /// Description: letters and spaces.
    pub description: String,
    /// Opening price in cents.
    pub initial_bid: i64,
    /// Reserve price in cents (at least `initial_bid`).
    pub reserve: i64,
    /// Event time, milliseconds since the Unix epoch (UTC).
    pub date_time: i64,
    /// When the auction closes, milliseconds since the Unix epoch (UTC); after `date_time`.
    pub expires: i64,
    /// Id of the selling person.
    pub seller: i64,
    /// Category, from [`FIRST_CATEGORY_ID`].
    pub category: i64,
    /// Padding letters.
    pub extra: String,
}

// ---- configuration and channel table ------------------------------------------------------

/// Parameters of a Nexmark stream; everything else is a constant of the model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NexmarkConfig {
    /// Seed of every draw. Default [`DEFAULT_SEED`].
    pub seed: u64,
    /// Events of all kinds per second of event time (not of wall-clock time). Default
    /// [`DEFAULT_EVENT_RATE`]; must be finite and positive.
    pub event_rate: f64,
}

impl Default for NexmarkConfig {
    fn default() -> Self {
        NexmarkConfig {
            seed: DEFAULT_SEED,
            event_rate: DEFAULT_EVENT_RATE,
        }
    }
}

/// Errors of the generator's constructors.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NexmarkError {
    /// The event rate is not a finite positive number.
    #[error("nexmark event rate must be a finite positive number of events per second, not {0}")]
    InvalidEventRate(f64),
}

/// The channels' names and urls, fixed by the seed: the url of each of the [`HOT_CHANNELS`]
/// and of each cold channel `channel-0 .. channel-9999` is a random
/// `https://www.nexmark.com/<a>/<b>/<c>/item.htm?query=1`, and nine in ten cold urls also
/// carry `&channel_id=<the channel number with its 32 bits reversed>`.
#[derive(Debug)]
pub struct ChannelTable {
    hot_urls: Vec<String>,
    cold_channels: Vec<String>,
    cold_urls: Vec<String>,
}

/// `|v with its 32 bits reversed, read as a signed 32-bit integer|` (Java's
/// `Math.abs(Integer.reverse(v))`, but without its overflow at `i32::MIN`).
fn reversed_channel_id(v: u32) -> i64 {
    i64::from(v.reverse_bits() as i32).abs()
}

/// A random url, its three path parts drawn for `key` (an "event number" outside the event
/// stream, counted down from `u64::MAX`).
fn base_url(seed: u64, key: u64) -> String {
    let n = !key;
    let part = |p: u64| small_string(seed, n, 100 * p, 5, b'_');
    format!(
        "https://www.nexmark.com/{}/{}/{}/item.htm?query=1",
        part(0),
        part(1),
        part(2)
    )
}

impl ChannelTable {
    /// The table of `seed`: [`HOT_CHANNELS`]`.len()` + [`CHANNELS_NUMBER`] urls.
    pub fn new(seed: u64) -> Self {
        let hot_urls = (0..HOT_CHANNELS.len() as u64)
            .map(|i| base_url(seed, URL_STREAM + i))
            .collect();
        let cold_channels = (0..CHANNELS_NUMBER)
            .map(|k| format!("channel-{k}"))
            .collect();
        let cold_urls = (0..CHANNELS_NUMBER)
            .map(|k| {
                let mut url = base_url(seed, k);
                if below(draw(seed, !k, D_CHANNEL_ID), 10) > 0 {
                    url.push_str(&format!("&channel_id={}", reversed_channel_id(k as u32)));
                }
                url
            })
            .collect();
        ChannelTable {
            hot_urls,
            cold_channels,
            cold_urls,
        }
    }

    /// Url of hot channel `i` (`HOT_CHANNELS[i]`).
    ///
    /// # Panics
    /// When `i >= HOT_CHANNELS.len()`.
    pub fn hot_url(&self, i: usize) -> &str {
        &self.hot_urls[i]
    }

    /// Name of cold channel `k`: `channel-<k>`.
    ///
    /// # Panics
    /// When `k >= CHANNELS_NUMBER`.
    pub fn cold_channel(&self, k: usize) -> &str {
        &self.cold_channels[k]
    }

    /// Url of cold channel `k`.
    ///
    /// # Panics
    /// When `k >= CHANNELS_NUMBER`.
    pub fn cold_url(&self, k: usize) -> &str {
        &self.cold_urls[k]
    }
}

// ---- the model ----------------------------------------------------------------------------

/// The Nexmark event stream of one configuration: makes any event from its number, alone or
/// in Arrow batches. Cheap to clone (the channel table is shared).
#[derive(Clone, Debug)]
pub struct NexmarkModel {
    config: NexmarkConfig,
    channels: Arc<ChannelTable>,
}

impl NexmarkModel {
    /// The stream of `config`; builds its channel table (about 10,000 urls).
    ///
    /// # Errors
    /// [`NexmarkError::InvalidEventRate`] unless the event rate is finite and positive.
    pub fn new(config: NexmarkConfig) -> Result<Self, NexmarkError> {
        if !(config.event_rate.is_finite() && config.event_rate > 0.0) {
            return Err(NexmarkError::InvalidEventRate(config.event_rate));
        }
        Ok(NexmarkModel {
            config,
            channels: Arc::new(ChannelTable::new(config.seed)),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NexmarkConfig {
        &self.config
    }

    /// The channel table of the seed.
    pub fn channels(&self) -> &ChannelTable {
        &self.channels
    }

    /// Event time of event `n`, milliseconds since the Unix epoch (see [`timestamp_ms`]).
    pub fn timestamp_ms(&self, n: u64) -> i64 {
        timestamp_ms(n, self.config.event_rate)
    }

    fn d(&self, n: u64, k: u64) -> u64 {
        draw(self.config.seed, n, k)
    }

    /// A person or seller id for event `n`: with probability `1 - 1/hot_ratio` the hot one
    /// (`hot_offset` past a multiple of [`HOT_ID_STRIDE`]), otherwise one of the newest
    /// people or slightly ahead of them. 0-based.
    fn pick_person(
        &self,
        n: u64,
        hot_draw: u64,
        cold_draw: u64,
        hot_ratio: u64,
        hot_offset: i64,
    ) -> i64 {
        let newest = last_base0_person_id(n);
        if below(self.d(n, hot_draw), hot_ratio) > 0 {
            (newest / HOT_ID_STRIDE) * HOT_ID_STRIDE + hot_offset
        } else {
            let people = newest + 1;
            let active = people.min(NUM_ACTIVE_PEOPLE);
            people - active + below(self.d(n, cold_draw), (active + PERSON_ID_LEAD) as u64) as i64
        }
    }

    /// The bid of event `n`, which should be a bid event ([`is_bid`]); other numbers give a
    /// bid made by the same arithmetic.
    pub fn make_bid(&self, n: u64) -> Bid<'_> {
        let newest_auction = last_base0_auction_id(n);
        let auction = if below(self.d(n, D_AUCTION_HOT), HOT_AUCTION_RATIO) > 0 {
            (newest_auction / HOT_ID_STRIDE) * HOT_ID_STRIDE
        } else {
            let lo = (newest_auction - NUM_IN_FLIGHT_AUCTIONS).max(0);
            let span = (newest_auction - lo + 1 + AUCTION_ID_LEAD) as u64;
            lo + below(self.d(n, D_AUCTION), span) as i64
        } + FIRST_AUCTION_ID;
        let bidder =
            self.pick_person(n, D_BIDDER_HOT, D_BIDDER, HOT_BIDDERS_RATIO, 1) + FIRST_PERSON_ID;
        let price = price_from_draw(self.d(n, D_PRICE));
        let channel_draw = self.d(n, D_CHANNEL);
        let (channel, url) = if below(self.d(n, D_CHANNEL_HOT), HOT_CHANNELS_RATIO) > 0 {
            let i = below(channel_draw, HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[i], self.channels.hot_url(i))
        } else {
            let k = below(channel_draw, CHANNELS_NUMBER) as usize;
            (self.channels.cold_channel(k), self.channels.cold_url(k))
        };
        // Padding towards AVG_BID_BYTE_SIZE for a 32-byte rest of the row: 68 letters ± 14.
        let want = AVG_BID_BYTE_SIZE - 32;
        let delta = (want as f64 * 0.2).round_ties_even() as i64;
        let len =
            (want - delta) as usize + below(self.d(n, D_EXTRA_LEN), 2 * delta as u64) as usize;
        let mut extra = BidExtra {
            len: len.min(BID_EXTRA_MAX) as u8,
            bytes: [0; BID_EXTRA_MAX],
        };
        for (w, chunk) in extra.bytes.chunks_exact_mut(LETTERS_PER_WORD).enumerate() {
            let mut z = self.d(n, D_EXTRA_WORDS + w as u64);
            for c in chunk {
                *c = b'a' + (z % 26) as u8;
                z /= 26;
            }
        }
        Bid {
            auction,
            bidder,
            price,
            channel,
            url,
            date_time: self.timestamp_ms(n),
            extra,
        }
    }

    /// The person of event `n`, which should be a person event ([`is_person`]).
    pub fn make_person(&self, n: u64) -> Person {
        let seed = self.config.seed;
        let id = last_base0_person_id(n) + FIRST_PERSON_ID;
        let name = format!(
            "{} {}",
            FIRST_NAMES[below(self.d(n, 0), FIRST_NAMES.len() as u64) as usize],
            LAST_NAMES[below(self.d(n, 1), LAST_NAMES.len() as u64) as usize]
        );
        let email_address = format!(
            "{}@{}.com",
            small_string(seed, n, 100, 8, b' '),
            small_string(seed, n, 200, 6, b' ')
        );
        let credit_card = format!(
            "{:04} {:04} {:04} {:04}",
            below(self.d(n, 2), 10_000),
            below(self.d(n, 3), 10_000),
            below(self.d(n, 4), 10_000),
            below(self.d(n, 5), 10_000)
        );
        let city = US_CITIES[below(self.d(n, 6), US_CITIES.len() as u64) as usize];
        let state = US_STATES[below(self.d(n, 7), US_STATES.len() as u64) as usize];
        let current = 8
            + (name.len() + email_address.len() + credit_card.len() + city.len() + state.len())
                as i64;
        let extra = extra_letters(seed, n, current, AVG_PERSON_BYTE_SIZE, 300);
        Person {
            id,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time: self.timestamp_ms(n),
            extra,
        }
    }

    /// The auction of event `n`, which should be an auction event ([`is_auction`]). It
    /// expires between 1 ms and twice the event time of 100 auctions later after it opens.
    pub fn make_auction(&self, n: u64) -> Auction {
        let seed = self.config.seed;
        let id = last_base0_auction_id(n) + FIRST_AUCTION_ID;
        let seller = self.pick_person(n, 0, 1, HOT_SELLERS_RATIO, 0) + FIRST_PERSON_ID;
        let category = FIRST_CATEGORY_ID + below(self.d(n, 2), NUM_CATEGORIES) as i64;
        let initial_bid = price_from_draw(self.d(n, 3));
        let date_time = self.timestamp_ms(n);
        let ahead = (NUM_IN_FLIGHT_AUCTIONS as u64 * TOTAL_PROPORTION) / AUCTION_PROPORTION;
        let horizon = self.timestamp_ms(n + ahead) - date_time;
        let expires = date_time + 1 + below(self.d(n, 4), (horizon * 2).max(1) as u64) as i64;
        let item_name = small_string(seed, n, 100, 20, b' ');
        let description = small_string(seed, n, 200, 100, b' ');
        let reserve = initial_bid + price_from_draw(self.d(n, 5));
        let current = 8 + (item_name.len() + description.len()) as i64 + 5 * 8;
        let extra = extra_letters(seed, n, current, AVG_AUCTION_BYTE_SIZE, 400);
        Auction {
            id,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller,
            category,
            extra,
        }
    }

    /// Bids `first_bid .. first_bid + count` (0-based bid indexes, not event numbers) as a
    /// batch of [`NexmarkTable::Bid`]'s schema.
    pub fn bid_batch(&self, first_bid: u64, count: usize) -> RecordBatch {
        let mut auction = Vec::with_capacity(count);
        let mut bidder = Vec::with_capacity(count);
        let mut price = Vec::with_capacity(count);
        let mut channel = StringBuilder::with_capacity(count, count * 12);
        let mut url = StringBuilder::with_capacity(count, count * 80);
        let mut date_time = Vec::with_capacity(count);
        let mut extra = StringBuilder::with_capacity(count, count * 68);
        for i in first_bid..first_bid + count as u64 {
            let b = self.make_bid(bid_event_number(i));
            auction.push(b.auction);
            bidder.push(b.bidder);
            price.push(b.price);
            channel.append_value(b.channel);
            url.append_value(b.url);
            date_time.push(ms_to_ns(b.date_time));
            extra.append_value(b.extra.as_str());
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(auction)),
            Arc::new(Int64Array::from(bidder)),
            Arc::new(Int64Array::from(price)),
            Arc::new(channel.finish()),
            Arc::new(url.finish()),
            Arc::new(TimestampNanosecondArray::from(date_time)),
            Arc::new(extra.finish()),
        ];
        RecordBatch::try_new(NexmarkTable::Bid.schema(), columns).expect("bid batch")
    }

    /// The persons among events `first_event .. end_event`, as a batch of
    /// [`NexmarkTable::Person`]'s schema.
    pub fn person_batch(&self, first_event: u64, end_event: u64) -> RecordBatch {
        let (lo, hi) = row_range(NexmarkTable::Person, first_event, end_event);
        let count = (hi - lo) as usize;
        let mut id = Vec::with_capacity(count);
        let mut name = StringBuilder::with_capacity(count, count * 12);
        let mut email = StringBuilder::with_capacity(count, count * 14);
        let mut card = StringBuilder::with_capacity(count, count * 19);
        let mut city = StringBuilder::with_capacity(count, count * 8);
        let mut state = StringBuilder::with_capacity(count, count * 2);
        let mut date_time = Vec::with_capacity(count);
        let mut extra = StringBuilder::with_capacity(count, count * 140);
        for i in lo..hi {
            let p = self.make_person(person_event_number(i));
            id.push(p.id);
            name.append_value(&p.name);
            email.append_value(&p.email_address);
            card.append_value(&p.credit_card);
            city.append_value(p.city);
            state.append_value(p.state);
            date_time.push(ms_to_ns(p.date_time));
            extra.append_value(&p.extra);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(id)),
            Arc::new(name.finish()),
            Arc::new(email.finish()),
            Arc::new(card.finish()),
            Arc::new(city.finish()),
            Arc::new(state.finish()),
            Arc::new(TimestampNanosecondArray::from(date_time)),
            Arc::new(extra.finish()),
        ];
        RecordBatch::try_new(NexmarkTable::Person.schema(), columns).expect("person batch")
    }

    /// The auctions among events `first_event .. end_event`, as a batch of
    /// [`NexmarkTable::Auction`]'s schema.
    pub fn auction_batch(&self, first_event: u64, end_event: u64) -> RecordBatch {
        let (lo, hi) = row_range(NexmarkTable::Auction, first_event, end_event);
        let count = (hi - lo) as usize;
        let mut id = Vec::with_capacity(count);
        let mut item_name = StringBuilder::with_capacity(count, count * 10);
        let mut description = StringBuilder::with_capacity(count, count * 50);
        let mut initial_bid = Vec::with_capacity(count);
        let mut reserve = Vec::with_capacity(count);
        let mut date_time = Vec::with_capacity(count);
        let mut expires = Vec::with_capacity(count);
        let mut seller = Vec::with_capacity(count);
        let mut category = Vec::with_capacity(count);
        let mut extra = StringBuilder::with_capacity(count, count * 400);
        for i in lo..hi {
            let a = self.make_auction(auction_event_number(i));
            id.push(a.id);
            item_name.append_value(&a.item_name);
            description.append_value(&a.description);
            initial_bid.push(a.initial_bid);
            reserve.push(a.reserve);
            date_time.push(ms_to_ns(a.date_time));
            expires.push(ms_to_ns(a.expires));
            seller.push(a.seller);
            category.push(a.category);
            extra.append_value(&a.extra);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(id)),
            Arc::new(item_name.finish()),
            Arc::new(description.finish()),
            Arc::new(Int64Array::from(initial_bid)),
            Arc::new(Int64Array::from(reserve)),
            Arc::new(TimestampNanosecondArray::from(date_time)),
            Arc::new(TimestampNanosecondArray::from(expires)),
            Arc::new(Int64Array::from(seller)),
            Arc::new(Int64Array::from(category)),
            Arc::new(extra.finish()),
        ];
        RecordBatch::try_new(NexmarkTable::Auction.schema(), columns).expect("auction batch")
    }

    /// The rows of `table` among events `first_event .. end_event` as a batch of the table's
    /// schema (empty when the range is).
    pub fn batch(&self, table: NexmarkTable, first_event: u64, end_event: u64) -> RecordBatch {
        match table {
            NexmarkTable::Person => self.person_batch(first_event, end_event),
            NexmarkTable::Auction => self.auction_batch(first_event, end_event),
            NexmarkTable::Bid => {
                let (lo, hi) = row_range(NexmarkTable::Bid, first_event, end_event);
                self.bid_batch(lo, (hi - lo) as usize)
            }
        }
    }

    /// Writes the rows of `table` among events `first_event .. end_event` to `out` as CSV
    /// lines (see [`write_bid_csv`], [`write_person_csv`], [`write_auction_csv`]).
    ///
    /// # Errors
    /// Errors of `out`.
    pub fn write_csv(
        &self,
        table: NexmarkTable,
        first_event: u64,
        end_event: u64,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let (lo, hi) = row_range(table, first_event, end_event);
        let mut line = Vec::with_capacity(1024);
        for i in lo..hi {
            line.clear();
            let n = table.event_number(i);
            match table {
                NexmarkTable::Person => write_person_csv(&mut line, &self.make_person(n))?,
                NexmarkTable::Auction => write_auction_csv(&mut line, &self.make_auction(n))?,
                NexmarkTable::Bid => write_bid_csv(&mut line, &self.make_bid(n))?,
            }
            out.write_all(&line)?;
        }
        Ok(())
    }
}

/// Row indexes `lo .. hi` of `table` whose events fall in `first_event .. end_event`.
fn row_range(table: NexmarkTable, first_event: u64, end_event: u64) -> (u64, u64) {
    let lo = table.rows_before(first_event);
    let hi = table.rows_before(end_event.max(first_event));
    (lo, hi)
}

/// Milliseconds to the nanoseconds of a `TIMESTAMP` column (saturating past year 2262).
fn ms_to_ns(ms: i64) -> i64 {
    ms.saturating_mul(1_000_000)
}

// ---- CSV ----------------------------------------------------------------------------------

/// The text of `ms` (milliseconds since the Unix epoch) as UTC `YYYY-MM-DD HH:MM:SS.mmm`,
/// for years 0 to 9999.
fn timestamp_text(ms: i64) -> Option<[u8; 23]> {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date of a day count (proleptic Gregorian; H. Hinnant's algorithm).
    let z = days.checked_add(719_468)?;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let mut t = *b"0000-00-00 00:00:00.000";
    let mut digits = |at: usize, width: usize, mut v: i64| {
        for i in (at..at + width).rev() {
            t[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    digits(0, 4, year);
    digits(5, 2, month);
    digits(8, 2, day);
    digits(11, 2, sod / 3600);
    digits(14, 2, sod / 60 % 60);
    digits(17, 2, sod % 60);
    digits(20, 3, millis);
    Some(t)
}

/// Writes `ms` (milliseconds since the Unix epoch) as UTC `YYYY-MM-DD HH:MM:SS.mmm`, the text
/// form of a `TIMESTAMP(3)` (years past 9999 get more digits, years before 0 a sign).
///
/// # Errors
/// Errors of `out`.
pub fn write_timestamp(out: &mut impl Write, ms: i64) -> io::Result<()> {
    match timestamp_text(ms) {
        Some(t) => out.write_all(&t),
        None => {
            let t = chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
                .unwrap_or_else(|| ms.to_string());
            out.write_all(t.as_bytes())
        }
    }
}

/// Writes `v` in decimal, then `sep`.
fn put_int(out: &mut impl Write, v: i64, sep: u8) -> io::Result<()> {
    let mut buf = [0u8; 21];
    let mut u = v.unsigned_abs();
    let mut i = buf.len() - 1;
    buf[i] = sep;
    loop {
        i -= 1;
        buf[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    out.write_all(&buf[i..])
}

/// Writes `s`, then `sep`.
fn put_str(out: &mut impl Write, s: &str, sep: u8) -> io::Result<()> {
    out.write_all(s.as_bytes())?;
    out.write_all(&[sep])
}

/// Writes the timestamp `ms` (see [`write_timestamp`]), then `sep`.
fn put_timestamp(out: &mut impl Write, ms: i64, sep: u8) -> io::Result<()> {
    write_timestamp(out, ms)?;
    out.write_all(&[sep])
}

/// Writes a bid as one CSV line: `auction,bidder,price,channel,url,date_time,extra\n`, no
/// quoting (no field contains a comma, quote or line break), `date_time` as in
/// [`write_timestamp`].
///
/// # Errors
/// Errors of `out`.
pub fn write_bid_csv(out: &mut impl Write, bid: &Bid<'_>) -> io::Result<()> {
    put_int(out, bid.auction, b',')?;
    put_int(out, bid.bidder, b',')?;
    put_int(out, bid.price, b',')?;
    put_str(out, bid.channel, b',')?;
    put_str(out, bid.url, b',')?;
    put_timestamp(out, bid.date_time, b',')?;
    put_str(out, bid.extra.as_str(), b'\n')
}

/// Writes a person as one CSV line:
/// `id,name,email_address,credit_card,city,state,date_time,extra\n`, unquoted (names and
/// cities hold spaces but no commas).
///
/// # Errors
/// Errors of `out`.
pub fn write_person_csv(out: &mut impl Write, p: &Person) -> io::Result<()> {
    put_int(out, p.id, b',')?;
    put_str(out, &p.name, b',')?;
    put_str(out, &p.email_address, b',')?;
    put_str(out, &p.credit_card, b',')?;
    put_str(out, p.city, b',')?;
    put_str(out, p.state, b',')?;
    put_timestamp(out, p.date_time, b',')?;
    put_str(out, &p.extra, b'\n')
}

/// Writes an auction as one CSV line: `id,item_name,description,initial_bid,reserve,
/// date_time,expires,seller,category,extra\n`, unquoted.
///
/// # Errors
/// Errors of `out`.
pub fn write_auction_csv(out: &mut impl Write, a: &Auction) -> io::Result<()> {
    put_int(out, a.id, b',')?;
    put_str(out, &a.item_name, b',')?;
    put_str(out, &a.description, b',')?;
    put_int(out, a.initial_bid, b',')?;
    put_int(out, a.reserve, b',')?;
    put_timestamp(out, a.date_time, b',')?;
    put_timestamp(out, a.expires, b',')?;
    put_int(out, a.seller, b',')?;
    put_int(out, a.category, b',')?;
    put_str(out, &a.extra, b'\n')
}

// ---- the source-facing generator ---------------------------------------------------------

/// One table of a Nexmark stream, read by event offsets: offset `o` stands for "events
/// `0 .. o` have been produced", so offset 0 is the start and the rows after offset `a` up to
/// offset `b` are those whose event number `n` has `a <= n < b`. Any range costs time in
/// proportion to its rows only, so a source resumes at a checkpointed offset directly.
#[derive(Clone, Debug)]
pub struct NexmarkGenerator {
    model: NexmarkModel,
    table: NexmarkTable,
    events: Option<u64>,
}

impl NexmarkGenerator {
    /// The `table` rows of the stream of `config`, limited to events `0 .. events` when
    /// `events` is given (see [`events_for_bids`] to end after a number of bids), unbounded
    /// otherwise.
    ///
    /// # Errors
    /// As [`NexmarkModel::new`].
    pub fn new(
        config: NexmarkConfig,
        table: NexmarkTable,
        events: Option<u64>,
    ) -> Result<Self, NexmarkError> {
        Ok(NexmarkGenerator {
            model: NexmarkModel::new(config)?,
            table,
            events,
        })
    }

    /// A generator sharing `model` (and its channel table).
    pub fn with_model(model: NexmarkModel, table: NexmarkTable, events: Option<u64>) -> Self {
        NexmarkGenerator {
            model,
            table,
            events,
        }
    }

    /// The model.
    pub fn model(&self) -> &NexmarkModel {
        &self.model
    }

    /// The table.
    pub fn table(&self) -> NexmarkTable {
        self.table
    }

    /// The table's Arrow schema.
    pub fn schema(&self) -> SchemaRef {
        self.table.schema()
    }

    /// The event limit, if any: the offset at which the stream ends.
    pub fn events(&self) -> Option<u64> {
        self.events
    }

    /// `upto` capped at the event limit.
    fn cap(&self, upto: u64) -> u64 {
        self.events.map_or(upto, |e| upto.min(e))
    }

    /// Number of this table's rows after offset `after` up to offset `upto`.
    pub fn rows_count(&self, after: u64, upto: u64) -> u64 {
        let upto = self.cap(upto).max(after);
        self.table.rows_before(upto) - self.table.rows_before(after)
    }

    /// The table's rows after offset `after` up to offset `upto` (events `after .. upto`,
    /// capped at the event limit), in event order; an empty batch when there are none. The
    /// batch holds all of them: callers bound its size through the range (a group of 50
    /// events holds 1 person, 3 auctions and 46 bids).
    pub fn rows_between(&self, after: u64, upto: u64) -> RecordBatch {
        self.model
            .batch(self.table, after, self.cap(upto).max(after))
    }

    /// Writes the rows [`NexmarkGenerator::rows_between`] returns as CSV lines.
    ///
    /// # Errors
    /// Errors of `out`.
    pub fn write_csv_between(&self, after: u64, upto: u64, out: &mut impl Write) -> io::Result<()> {
        self.model
            .write_csv(self.table, after, self.cap(upto).max(after), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow::array::{Array, StringArray};

    fn model() -> NexmarkModel {
        NexmarkModel::new(NexmarkConfig::default()).unwrap()
    }

    #[test]
    fn mix64_known_values() {
        assert_eq!(mix64(0), 0);
        // The first output of a splitmix64 generator seeded with 0.
        assert_eq!(mix64(EVENT_STRIDE), 0xE220_A839_7B1D_CDAF);
        assert_eq!(draw(0, 1, 0), 0xE220_A839_7B1D_CDAF);
        // The counter wraps.
        assert_eq!(
            draw(5, u64::MAX, 3),
            mix64(
                5u64.wrapping_sub(EVENT_STRIDE)
                    .wrapping_add(3u64.wrapping_mul(DRAW_STRIDE))
            )
        );
    }

    #[test]
    fn uniform_helpers() {
        assert_eq!(below(u64::MAX, 1 << 53), (1 << 53) - 1);
        assert_eq!(below(7 << 11, 5), 2);
        assert_eq!(unit_double(0), 0.0);
        assert!(unit_double(u64::MAX) < 1.0);
        assert_eq!(unit_double(1 << 63), 0.5);
        let mut s = Vec::new();
        push_letters(0, 3, &mut s);
        assert_eq!(s, b"aaa");
        s.clear();
        push_letters(1 + 2 * 26 + 25 * 26 * 26, 4, &mut s);
        assert_eq!(s, b"bcza");
    }

    #[test]
    fn prices() {
        assert_eq!(price_from_draw(0), 100);
        // u = 1/2: 10^3 * 100.
        assert_eq!(price_from_draw(1 << 63), 100_000);
        let top = price_from_draw(u64::MAX);
        assert!((99_999_990..=100_000_000).contains(&top), "{top}");
    }

    #[test]
    fn event_kinds_and_numbers() {
        assert!(is_person(0) && is_person(50) && !is_person(1));
        assert!(is_auction(1) && is_auction(3) && !is_auction(4) && !is_auction(50));
        assert!(is_bid(4) && is_bid(49) && !is_bid(50) && !is_bid(3));
        assert_eq!(bid_event_number(0), 4);
        assert_eq!(bid_event_number(45), 49);
        assert_eq!(bid_event_number(46), 54);
        assert_eq!(person_event_number(0), 0);
        assert_eq!(person_event_number(3), 150);
        assert_eq!(auction_event_number(0), 1);
        assert_eq!(auction_event_number(2), 3);
        assert_eq!(auction_event_number(3), 51);
        assert_eq!(events_for_bids(0), 0);
        assert_eq!(events_for_bids(1), 5);
        assert_eq!(events_for_bids(46), 50);
        assert_eq!(events_for_bids(47), 55);
        for e in 0..400 {
            let kinds = [
                (NexmarkTable::Person, is_person(e)),
                (NexmarkTable::Auction, is_auction(e)),
                (NexmarkTable::Bid, is_bid(e)),
            ];
            assert_eq!(kinds.iter().filter(|(_, k)| *k).count(), 1);
            let table = NexmarkTable::of_event(e);
            for (t, k) in kinds {
                assert_eq!(t == table, k);
                let before = (0..e).filter(|&m| NexmarkTable::of_event(m) == t).count() as u64;
                assert_eq!(t.rows_before(e), before, "{t:?} before {e}");
                if k {
                    assert_eq!(t.event_number(before), e);
                }
            }
        }
    }

    #[test]
    fn newest_ids() {
        assert_eq!(last_base0_person_id(0), 0);
        assert_eq!(last_base0_person_id(49), 0);
        assert_eq!(last_base0_person_id(50), 1);
        assert_eq!(last_base0_person_id(149), 2);
        assert_eq!(last_base0_auction_id(0), -1);
        assert_eq!(last_base0_auction_id(1), 0);
        assert_eq!(last_base0_auction_id(3), 2);
        assert_eq!(last_base0_auction_id(4), 2);
        assert_eq!(last_base0_auction_id(49), 2);
        assert_eq!(last_base0_auction_id(50), 2);
        assert_eq!(last_base0_auction_id(51), 3);
        assert_eq!(last_base0_auction_id(104), 8);
    }

    #[test]
    fn timestamps() {
        assert_eq!(timestamp_ms(0, 10_000.0), BASE_TIME_MS);
        assert_eq!(timestamp_ms(9, 10_000.0), BASE_TIME_MS);
        assert_eq!(timestamp_ms(10, 10_000.0), BASE_TIME_MS + 1);
        assert_eq!(timestamp_ms(10_000, 10_000.0), BASE_TIME_MS + 1000);
        // 3 events/s: 333333.33.. us apart, truncated.
        assert_eq!(timestamp_ms(1, 3.0), BASE_TIME_MS + 333);
        assert_eq!(timestamp_ms(3, 3.0), BASE_TIME_MS + 1000);
        let mut s = Vec::new();
        write_timestamp(&mut s, BASE_TIME_MS).unwrap();
        assert_eq!(s, b"2015-07-15 00:00:00.000");
        s.clear();
        write_timestamp(&mut s, 951_868_799_999).unwrap();
        assert_eq!(s, b"2000-02-29 23:59:59.999");
        s.clear();
        write_timestamp(&mut s, -1).unwrap();
        assert_eq!(s, b"1969-12-31 23:59:59.999");
        s.clear();
        write_timestamp(&mut s, 0).unwrap();
        assert_eq!(s, b"1970-01-01 00:00:00.000");
        // Past year 9999 (chrono's text).
        s.clear();
        write_timestamp(&mut s, 253_402_300_800_123).unwrap();
        assert_eq!(s, b"+10000-01-01 00:00:00.123");
        s.clear();
        write_timestamp(&mut s, 253_402_300_799_999).unwrap();
        assert_eq!(s, b"9999-12-31 23:59:59.999");
    }

    #[test]
    fn integers() {
        for v in [0, 7, -7, 10, 1_000_000, i64::MAX, i64::MIN, -100] {
            let mut s = Vec::new();
            put_int(&mut s, v, b';').unwrap();
            assert_eq!(s, format!("{v};").as_bytes());
        }
    }

    #[test]
    fn channel_ids() {
        assert_eq!(reversed_channel_id(0), 0);
        // Bit 0 becomes the sign bit: Java's abs would overflow here.
        assert_eq!(reversed_channel_id(1), 1 << 31);
        assert_eq!(reversed_channel_id(2), 1 << 30);
        assert_eq!(reversed_channel_id(2928), 248_512_512);
        let t = ChannelTable::new(DEFAULT_SEED);
        assert_eq!(t.cold_channel(2928), "channel-2928");
        assert!(
            t.cold_url(2928)
                .ends_with("item.htm?query=1&channel_id=248512512")
        );
        let with_id = (0..CHANNELS_NUMBER as usize)
            .filter(|&k| t.cold_url(k).contains("&channel_id="))
            .count();
        assert!((8800..9200).contains(&with_id), "{with_id}");
        for i in 0..HOT_CHANNELS.len() {
            assert!(t.hot_url(i).starts_with("https://www.nexmark.com/"));
        }
    }

    #[test]
    fn bids_follow_the_model() {
        let m = model();
        let mut hot_auction = 0;
        for i in 0..20_000 {
            let n = bid_event_number(i);
            let b = m.make_bid(n);
            let newest_auction = last_base0_auction_id(n) + FIRST_AUCTION_ID;
            assert!(b.auction >= FIRST_AUCTION_ID && b.auction <= newest_auction + AUCTION_ID_LEAD);
            if b.auction == (newest_auction - FIRST_AUCTION_ID) / 100 * 100 + FIRST_AUCTION_ID {
                hot_auction += 1;
            }
            assert!(b.bidder >= FIRST_PERSON_ID);
            assert!((100..=100_000_000).contains(&b.price));
            assert!((54..82).contains(&b.extra.as_str().len()));
            assert!(b.extra.as_str().bytes().all(|c| c.is_ascii_lowercase()));
            assert_eq!(b.date_time, m.timestamp_ms(n));
        }
        assert!((9_500..11_500).contains(&hot_auction), "{hot_auction}");
    }

    #[test]
    fn persons_and_auctions_follow_the_model() {
        let m = model();
        for i in 0..500 {
            let p = m.make_person(person_event_number(i));
            assert_eq!(p.id, FIRST_PERSON_ID + i as i64);
            assert!(p.email_address.ends_with(".com"));
            assert_eq!(p.credit_card.len(), 19);
            let a = m.make_auction(auction_event_number(i));
            assert_eq!(a.id, FIRST_AUCTION_ID + i as i64);
            assert!(a.reserve >= a.initial_bid);
            assert!(a.expires > a.date_time);
            assert!((FIRST_CATEGORY_ID..FIRST_CATEGORY_ID + 5).contains(&a.category));
            assert!(a.seller >= FIRST_PERSON_ID);
            assert!(a.seller <= last_base0_person_id(auction_event_number(i)) + 1010);
        }
    }

    #[test]
    fn batches_match_rows_and_resume_anywhere() {
        let m = model();
        let g = NexmarkGenerator::with_model(m.clone(), NexmarkTable::Bid, Some(1_000));
        let whole = g.rows_between(0, 1_000);
        assert_eq!(whole.num_rows() as u64, bids_before(1_000));
        assert_eq!(g.rows_count(0, 5_000), bids_before(1_000));
        // Split anywhere: the pieces concatenate to the whole.
        let parts: Vec<RecordBatch> = [0u64, 3, 4, 5, 77, 500, 1_000, 2_000]
            .windows(2)
            .map(|w| g.rows_between(w[0], w[1]))
            .collect();
        let joined = arrow::compute::concat_batches(&g.schema(), &parts).unwrap();
        assert_eq!(joined, whole);
        assert_eq!(g.rows_between(700, 600).num_rows(), 0);
        assert_eq!(g.rows_between(1_000, 2_000).num_rows(), 0);

        let extra = whole
            .column(6)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let b = m.make_bid(bid_event_number(17));
        assert_eq!(extra.value(17), b.extra.as_str());
        let ts = whole
            .column(5)
            .as_any()
            .downcast_ref::<TimestampNanosecondArray>()
            .unwrap();
        assert_eq!(ts.value(17), b.date_time * 1_000_000);
        assert_eq!(whole.schema(), NexmarkTable::Bid.schema());

        for table in [NexmarkTable::Person, NexmarkTable::Auction] {
            let g = NexmarkGenerator::with_model(m.clone(), table, None);
            let whole = g.rows_between(0, 1_000);
            assert_eq!(whole.num_rows() as u64, table.rows_before(1_000));
            assert_eq!(whole.schema(), table.schema());
            let parts = [g.rows_between(0, 51), g.rows_between(51, 1_000)];
            let joined = arrow::compute::concat_batches(&g.schema(), &parts).unwrap();
            assert_eq!(joined, whole);
            assert_eq!(whole.column(0).null_count(), 0);
        }
    }

    #[test]
    fn csv_lines() {
        let m = model();
        let g = NexmarkGenerator::with_model(m.clone(), NexmarkTable::Bid, None);
        let mut out = Vec::new();
        g.write_csv_between(0, 5, &mut out).unwrap();
        let mut want = Vec::new();
        write_bid_csv(&mut want, &m.make_bid(4)).unwrap();
        assert_eq!(out, want);
        let line = String::from_utf8(out).unwrap();
        assert_eq!(line.matches(',').count(), 6);
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn bad_event_rates() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let config = NexmarkConfig {
                event_rate: rate,
                ..NexmarkConfig::default()
            };
            assert!(NexmarkModel::new(config).is_err());
        }
    }
}
