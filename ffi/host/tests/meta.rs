//! The meta commands and gat/gats, byte for byte against memcached 1.6's answers.
//!
//! [`TRANSCRIPT`] holds requests and the answers Debian's memcached 1.6.18 gave them (CAS
//! values masked, since the two servers number their items differently). Our host on the
//! built-in storage engine must give exactly those answers; when a `memcached` binary is on the
//! PATH, the test also starts it and checks it still gives them, so the transcript stays
//! memcached's own (`.ci/run` installs memcached and sets `MCB_REQUIRE_MEMCACHED=1`, so the
//! comparison cannot silently be skipped there). Flags a v1 engine cannot honour get
//! `CLIENT_ERROR` on every engine; gat and `mg … T` get it over an engine without GAT.

#[path = "transcript/classic.rs"]
mod classic;
mod common;

use common::{test_engine, Memcached, Server, TIMEOUT};
use std::io::{Read, Write};
use std::net::TcpStream;

/// Requests (`\r\n` written out) and memcached 1.6.18's answers, in order, on one connection of a
/// fresh server. `$CAS` in a request is the last CAS an answer reported, `$BIG` 2 MiB of data,
/// `$KEY250` and `$KEY251` keys of the longest length and one byte more; `c*` (but not `c0`),
/// a `VALUE` line's `*` and `me`'s `cas=*` stand for a CAS; `me`'s `cls` and `size` (memcached's
/// slab class and item size) are left out.
const TRANSCRIPT: &[(&str, &str)] = &[
    // mg: misses, quiet, opaque and key echoes.
    ("mg foo v\r\n", "EN\r\n"),
    ("mg foo v q\r\n", ""),
    ("mg foo Oxx k v\r\n", "EN Oxx kfoo\r\n"),
    ("mg foo s t c f Oab\r\n", "EN Oab\r\n"),
    // ms, then every mg return flag in the request's order.
    ("ms foo 3 T0 F5\r\nbar\r\n", "HD\r\n"),
    (
        "mg foo v f t c s k Oab\r\n",
        "VA 3 f5 t-1 c* s3 kfoo Oab\r\nbar\r\n",
    ),
    ("mg foo k c v\r\n", "VA 3 kfoo c*\r\nbar\r\n"),
    ("mg foo\r\n", "HD\r\n"),
    ("mg foo k q\r\n", "HD kfoo\r\n"),
    ("mg foo v u\r\n", "VA 3\r\nbar\r\n"),
    ("mg foo v Pxx Lyy\r\n", "VA 3\r\nbar\r\n"),
    ("mg foo v P Pxx\r\n", "CLIENT_ERROR duplicate flag\r\n"),
    ("mg  foo  v\r\n", "VA 3\r\nbar\r\n"),
    // ms flags: CAS compare, c, modes.
    ("ms foo 2 C$CAS c\r\nxx\r\n", "HD c*\r\n"),
    ("ms foo 2 C1\r\nyy\r\n", "EX\r\n"),
    ("ms nope 2 C1\r\nyy\r\n", "NF\r\n"),
    ("ms foo 2 MA q\r\nzz\r\n", ""),
    ("ms foo 2 MP\r\n<<\r\n", "HD\r\n"),
    ("mg foo v s\r\n", "VA 6 s6\r\n<<xxzz\r\n"),
    ("ms foo 2 ME\r\nzz\r\n", "NS\r\n"),
    ("ms foo 2 ME q\r\nzz\r\n", "NS\r\n"),
    ("ms foo 2 MR F7 T100\r\nrr\r\n", "HD\r\n"),
    ("mg foo v f t\r\n", "VA 2 f7 t100\r\nrr\r\n"),
    ("ms nope 2 MR q c k\r\nzz\r\n", "NS c0 knope\r\n"),
    ("ms nope 2 MA\r\nzz\r\n", "NS\r\n"),
    ("ms new 2 ME k Oo1\r\nnn\r\n", "HD knew Oo1\r\n"),
    ("ms new 2 MS F4294967295\r\nss\r\n", "HD\r\n"),
    ("mg new f\r\n", "HD f4294967295\r\n"),
    ("ms e 0\r\n\r\n", "HD\r\n"),
    ("mg e s v\r\n", "VA 0 s0\r\n\r\n"),
    // Base64 keys: memcached marks an item `ms … b` stores and answers `k` (and `me`) in
    // base64 for it, whatever the request's `b`; an item stored with a plain key gets a plain
    // `k` even from a request in base64; a miss answers `k` as the request sent it. `me … b`
    // decodes its key; `me` ignores any other token after the key.
    ("ms Zm9vYg== 1 b k\r\nB\r\n", "HD kZm9vYg== b\r\n"),
    ("mg foob v\r\n", "VA 1\r\nB\r\n"),
    ("mg Zm9vYg== b k v\r\n", "VA 1 kZm9vYg== b\r\nB\r\n"),
    ("mg foob k s\r\n", "HD kZm9vYg== b s1\r\n"),
    (
        "me Zm9vYg== b\r\n",
        "ME Zm9vYg== exp=-1 la=0 cas=* fetch=yes\r\n",
    ),
    (
        "me foob x y\r\n",
        "ME Zm9vYg== exp=-1 la=0 cas=* fetch=yes\r\n",
    ),
    ("me Zm9 b\r\n", "CLIENT_ERROR bad command line format\r\n"),
    ("me Zm9vYg== bb\r\n", "EN\r\n"),
    ("me\r\n", "CLIENT_ERROR bad command line format\r\n"),
    ("ms plain 1\r\nP\r\n", "HD\r\n"),
    ("mg cGxhaW4= b k v\r\n", "VA 1 kplain\r\nP\r\n"),
    (
        "me cGxhaW4= b\r\n",
        "ME plain exp=-1 la=0 cas=* fetch=yes\r\n",
    ),
    ("mg bm9uZQ== b k v Oq\r\n", "EN kbm9uZQ== b Oq\r\n"),
    ("md bm9uZQ== b k q\r\n", "NF kbm9uZQ== b\r\n"),
    // An item `N` creates is not marked.
    ("mg Zm9vYw== b N30 k v\r\n", "VA 0 kfooc W\r\n\r\n"),
    // An append makes a new item, not marked (the `ms` answer is by the request's `b`); a
    // touch, an incr that fits and an invalidation change the item in place: still marked.
    ("ms Zm9vZQ== 1 b\r\nE\r\n", "HD\r\n"),
    ("ms Zm9vZQ== 1 b MA k\r\nF\r\n", "HD kZm9vZQ== b\r\n"),
    ("mg fooe k v\r\n", "VA 2 kfooe\r\nEF\r\n"),
    ("ms bnVt 1 b\r\n5\r\n", "HD\r\n"),
    ("incr num 1\r\n", "6\r\n"),
    ("mg num k T90 v\r\n", "VA 1 kbnVt b\r\n6\r\n"),
    ("md bnVt b I\r\n", "HD\r\n"),
    ("mg num k\r\n", "HD kbnVt b X W\r\n"),
    ("incr num 1000\r\n", "1006\r\n"),
    ("mg num k\r\n", "HD knum\r\n"),
    ("mg Zm9 b\r\n", "CLIENT_ERROR error decoding key\r\n"),
    // md.
    ("md foob C1\r\n", "EX\r\n"),
    ("md foob q\r\n", ""),
    ("md foob\r\n", "NF\r\n"),
    ("md foob q\r\n", "NF\r\n"),
    ("md foob Oxx k\r\n", "NF Oxx kfoob\r\n"),
    ("md new k Oq1\r\n", "HD knew Oq1\r\n"),
    // ma.
    ("ma cnt\r\n", "NF\r\n"),
    ("ma cnt q\r\n", "NF\r\n"),
    // (Decrements keep the number of digits: memcached pads a shorter number with spaces.)
    ("ma cnt N0 J10 v\r\n", "VA 2\r\n10\r\n"),
    ("ma cnt v\r\n", "VA 2\r\n11\r\n"),
    ("ma cnt D10 v c\r\n", "VA 2 c*\r\n21\r\n"),
    ("ma cnt MD D10 v\r\n", "VA 2\r\n11\r\n"),
    ("ma cnt M- D1 v\r\n", "VA 2\r\n10\r\n"),
    ("ma cnt M+ k O1\r\n", "HD kcnt O1\r\n"),
    ("ma cnt MI v q\r\n", ""),
    ("mg cnt v\r\n", "VA 2\r\n12\r\n"),
    (
        "ma e\r\n",
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    ),
    // ma with a CAS to compare (on a hit only), a TTL to set and to report.
    ("ms c1 2\r\n10\r\n", "HD\r\n"),
    ("mg c1 c\r\n", "HD c*\r\n"),
    ("ma c1 C$CAS v\r\n", "VA 2\r\n11\r\n"),
    ("ma c1 C1 v\r\n", "EX\r\n"),
    ("ma c1 T100 t v\r\n", "VA 2 t100\r\n12\r\n"),
    ("ma c1 t c\r\n", "HD t100 c*\r\n"),
    ("ma nope C5\r\n", "NF\r\n"),
    ("ma new2 N0 C5 v t\r\n", "VA 1 t-1\r\n0\r\n"),
    (
        "ma cnt Mx\r\n",
        "CLIENT_ERROR invalid mode for ma M token\r\n",
    ),
    (
        "ma cnt Dx\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    // A shorter number keeps the length of the one it replaced, padded with spaces (decr and
    // ma alike; the answer itself is not padded); a longer one grows the value.
    ("ms dn 3\r\n100\r\n", "HD\r\n"),
    ("decr dn 1\r\n", "99\r\n"),
    ("get dn\r\n", "VALUE dn 0 3\r\n99 \r\nEND\r\n"),
    ("ma dn MD D90 v\r\n", "VA 1\r\n9\r\n"),
    ("mg dn v s\r\n", "VA 3 s3\r\n9  \r\n"),
    ("incr dn 991\r\n", "1000\r\n"),
    ("mg dn v\r\n", "VA 4\r\n1000\r\n"),
    ("ma dn MD D995 v\r\n", "VA 1\r\n5\r\n"),
    ("incr dn 5\r\n", "10\r\n"),
    ("get dn\r\n", "VALUE dn 0 4\r\n10  \r\nEND\r\n"),
    // An item N creates expires N seconds from now (the server's uptime is not added).
    ("ma a2 N90\r\n", "HD\r\n"),
    ("mg a2 t v\r\n", "VA 1 t90\r\n0\r\n"),
    ("ma a3 N90 J7 t v\r\n", "VA 1 t90\r\n7\r\n"),
    // q hides the answer to a hit, not to an item N created.
    ("ma cq N0 q\r\n", "HD\r\n"),
    ("ma cq N0 q\r\n", ""),
    ("ma cq2 N0 J5 q v\r\n", "VA 1\r\n5\r\n"),
    ("ma cq2 N0 q v\r\n", ""),
    ("ma cq3 N0 q t\r\n", "HD t-1\r\n"),
    ("ma cq3 N0 q t\r\n", ""),
    // me (mn ends every request here): expiry, seconds since the last access, whether fetched;
    // looking changes neither. (memcached 1.6.18 prints a remaining TTL negated, `exp=-100`;
    // we print it as `t` does, so no item with a TTL is here.)
    ("me nope\r\n", "EN\r\n"),
    ("ms mek 1\r\nm\r\n", "HD\r\n"),
    ("me mek\r\n", "ME mek exp=-1 la=0 cas=* fetch=no\r\n"),
    ("me mek\r\n", "ME mek exp=-1 la=0 cas=* fetch=no\r\n"),
    ("mg mek v\r\n", "VA 1\r\nm\r\n"),
    ("me mek\r\n", "ME mek exp=-1 la=0 cas=* fetch=yes\r\n"),
    // Nor does `md … C0`'s look at the item (a fetched mark; a stale item's recache token,
    // which the next fetch wins).
    ("ms mel 1\r\nm\r\n", "HD\r\n"),
    ("md mel C0\r\n", "EX\r\n"),
    ("mg mel h\r\n", "HD h0\r\n"),
    ("md mel I\r\n", "HD\r\n"),
    ("me mel\r\n", "ME mel exp=-1 la=0 cas=* fetch=yes\r\n"),
    ("md mel C0\r\n", "EX\r\n"),
    ("mg mel v\r\n", "VA 1 X W\r\nm\r\n"),
    // Bad lines.
    ("mg\r\n", "ERROR\r\n"),
    ("mg foo v v\r\n", "CLIENT_ERROR duplicate flag\r\n"),
    ("mg foo x\r\n", "CLIENT_ERROR invalid flag\r\n"),
    ("mg foo noreply\r\n", "CLIENT_ERROR invalid flag\r\n"),
    (
        "mg foo T\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg foo Tx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg foo O123456789012345678901234567890123\r\n",
        "CLIENT_ERROR opaque token too long\r\n",
    ),
    ("ms foo\r\n", "CLIENT_ERROR bad command line format\r\n"),
    ("ms foo bar\r\n", "CLIENT_ERROR bad command line format\r\n"),
    (
        "ms foo 2 MX\r\nzz\r\n",
        "CLIENT_ERROR invalid mode for ms M token\r\n",
    ),
    (
        "ms foo 2 Ms\r\nzz\r\n",
        "CLIENT_ERROR invalid mode for ms M token\r\n",
    ),
    ("ms foo 2 S2\r\nzz\r\n", "CLIENT_ERROR invalid flag\r\n"),
    (
        "ms foo 2 T\r\nzz\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "ms foo 2 Fx\r\nzz\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    (
        "ms foo 2 C\r\nzz\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    ("md foo x\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n"),
    (
        "mg foo x x x x x x x x x x x x x x x x x\r\n",
        "CLIENT_ERROR invalid flag\r\n",
    ),
    (
        "mg foo x x x x x x x x x x x x x x x x x x\r\n",
        "CLIENT_ERROR options flags are too long\r\n",
    ),
    (
        "ms foo 1 x x x x x x x x x x x x x x x x\r\nA\r\n",
        "CLIENT_ERROR invalid flag\r\n",
    ),
    (
        "ms foo 1 x x x x x x x x x x x x x x x x x\r\nA\r\n",
        "CLIENT_ERROR options flags too long\r\nERROR\r\n",
    ),
    // Data past its length: the two bytes after it go with it, the rest is a command line.
    (
        "set bd 0 0 2\r\nabcd\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    ),
    ("set bd 0 0 2 noreply\r\nabcd\r\n", "ERROR\r\n"),
    (
        "ms bd 2\r\nabcd efg\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    ),
    (
        "ms bd 2 q\r\nabcd\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    ),
    (
        "set bd 0 0 2\r\nxxx\r\nget bd\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\nEND\r\n",
    ),
    ("mg bd v\r\n", "EN\r\n"),
    ("mg foo v\r\n", "VA 2\r\nrr\r\n"),
    // gat and gats.
    (
        "gat 100 foo cnt nope\r\n",
        "VALUE foo 7 2\r\nrr\r\nVALUE cnt 0 2\r\n12\r\nEND\r\n",
    ),
    ("mg foo t\r\n", "HD t100\r\n"),
    (
        "gats 0 foo nope foo\r\n",
        "VALUE foo 7 2 *\r\nrr\r\nVALUE foo 7 2 *\r\nrr\r\nEND\r\n",
    ),
    ("mg foo t\r\n", "HD t-1\r\n"),
    ("mg foo T30 t v\r\n", "VA 2 t30\r\nrr\r\n"),
    ("mg foo t\r\n", "HD t30\r\n"),
    ("gat 10\r\n", "END\r\n"),
    ("gat x foo\r\n", "CLIENT_ERROR invalid exptime argument\r\n"),
    ("gat\r\n", "ERROR\r\n"),
    // Stampede control: vivify on miss (N), recache below a TTL (R), invalidation (md I,
    // ms I with an older CAS), and the one winner (W) per stale period, others told Z.
    ("mg newk N30 v c t\r\n", "VA 0 c* t30 W\r\n\r\n"),
    ("mg newk N30 v\r\n", "VA 0 Z\r\n\r\n"),
    ("mg newk v k\r\n", "VA 0 knewk Z\r\n\r\n"),
    ("ms newk 3 T30\r\nnew\r\n", "HD\r\n"),
    ("mg newk N30 v\r\n", "VA 3\r\nnew\r\n"),
    ("mg nk2 N30 q k\r\n", "HD knk2 W\r\n"),
    ("ms r 1 T100\r\nr\r\n", "HD\r\n"),
    ("mg r R30 v\r\n", "VA 1\r\nr\r\n"),
    ("mg r R200 v t\r\n", "VA 1 t100 W\r\nr\r\n"),
    ("mg r R200 v\r\n", "VA 1 Z\r\nr\r\n"),
    ("mg r v\r\n", "VA 1 Z\r\nr\r\n"),
    ("ms s 2\r\nsv\r\n", "HD\r\n"),
    ("md s I T30\r\n", "HD\r\n"),
    ("mg s v c t\r\n", "VA 2 c* t30 X W\r\nsv\r\n"),
    ("mg s v c\r\n", "VA 2 c* Z X\r\nsv\r\n"),
    ("md s I q\r\n", ""),
    ("mg s v\r\n", "VA 2 X W\r\nsv\r\n"),
    ("md nope I\r\n", "NF\r\n"),
    ("md s I C1\r\n", "EX\r\n"),
    ("mg s c\r\n", "HD c* Z X\r\n"),
    ("ms s 3 C$CAS I\r\nnew\r\n", "HD\r\n"),
    ("mg s v\r\n", "VA 3\r\nnew\r\n"),
    ("ms s 3 C1 I\r\nold\r\n", "HD\r\n"),
    ("mg s v\r\n", "VA 3 X W\r\nold\r\n"),
    ("ms s 3 C99999 I\r\nnew\r\n", "EX\r\n"),
    ("ms nope 3 C1 I\r\nnew\r\n", "NF\r\n"),
    // Fetched before (h) and seconds since the last access (l), before this fetch; u leaves
    // both alone; a plain get counts as a fetch.
    ("ms hl 1\r\nx\r\n", "HD\r\n"),
    ("mg hl h l t\r\n", "HD h0 l0 t-1\r\n"),
    ("mg hl h l\r\n", "HD h1 l0\r\n"),
    ("mg hl h l u\r\n", "HD h1 l0\r\n"),
    ("mg nohl h l\r\n", "EN\r\n"),
    ("ms hl2 1\r\ny\r\n", "HD\r\n"),
    ("mg hl2 h u\r\n", "HD h0\r\n"),
    ("mg hl2 h\r\n", "HD h0\r\n"),
    ("ms hl3 1\r\nz\r\n", "HD\r\n"),
    ("get hl3\r\n", "VALUE hl3 0 1\r\nz\r\nEND\r\n"),
    ("mg hl3 h\r\n", "HD h1\r\n"),
    // The meta commands' numbers, as memcached's C reads them: times (T, N, R) in 32 bits
    // signed (2^31 is already past, 2^32 is 0, a negative R is never reached), F in 32 bits,
    // C, J and D in 64, the data length at most 2^31 - 3 (2^32 + 1 reads as 1); md words a bad
    // number as a bad flag.
    ("ms m1 1 T-1\r\nx\r\n", "HD\r\n"),
    ("mg m1 v\r\n", "EN\r\n"),
    ("ms m1 1 T2147483648\r\nx\r\n", "HD\r\n"),
    ("mg m1 v t\r\n", "EN\r\n"),
    ("ms m1 1 T4294967296\r\nx\r\n", "HD\r\n"),
    ("mg m1 v t\r\n", "VA 1 t-1\r\nx\r\n"),
    ("ms m1 1 T+5\r\nx\r\n", "HD\r\n"),
    ("mg m1 t\r\n", "HD t5\r\n"),
    ("ms m1 1 F4294967296\r\nx\r\n", "HD\r\n"),
    ("mg m1 f\r\n", "HD f0\r\n"),
    (
        "ms m1 1 F-1\r\nx\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    ("ms m1 1 F-0\r\nx\r\n", "HD\r\n"),
    (
        "ms m1 2147483648\r\nx\r\n",
        "CLIENT_ERROR bad command line format\r\nERROR\r\n",
    ),
    (
        "ms m1 -1\r\nx\r\n",
        "CLIENT_ERROR bad command line format\r\nERROR\r\n",
    ),
    ("ms m1 4294967297\r\nx\r\n", "HD\r\n"),
    ("ms m1 +1\r\nx\r\n", "HD\r\n"),
    (
        "ms m1 1 C18446744073709551616\r\nx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "ms m1 1 C-1\r\nx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    ("mg m1 T2147483648 v\r\n", "VA 1\r\nx\r\n"),
    ("mg m1 T-1 v\r\n", "EN\r\n"),
    ("mg m1 v\r\n", "EN\r\n"),
    ("ms m2 1\r\n5\r\n", "HD\r\n"),
    ("ma m2 D18446744073709551615 v\r\n", "VA 1\r\n4\r\n"),
    (
        "ma m2 D18446744073709551616 v\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    (
        "ma m2 D-1 v\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    ("ma m2 D+1 v\r\n", "VA 1\r\n5\r\n"),
    ("ma m3 N-1 v\r\n", "VA 1\r\n0\r\n"),
    ("ma m3 v\r\n", "NF\r\n"),
    (
        "ma m5 N0 J18446744073709551616 v\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    (
        "ma m5 N0 J-1 v\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    ("mg m6 N4294967296 v t\r\n", "VA 0 t-1 W\r\n\r\n"),
    (
        "md m2 C-1\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    ("md m2 T-1 I\r\n", "HD\r\n"),
    ("mg m2 R4294967296 v\r\n", "EN\r\n"),
    ("mg m2 R-1 v\r\n", "EN\r\n"),
    ("gat 4294967296 m2\r\n", "END\r\n"),
    ("gat -2147483649 m2\r\n", "END\r\n"),
    // Plain commands are unchanged.
    ("get foo\r\n", "VALUE foo 7 2\r\nrr\r\nEND\r\n"),
    // A set refused as too large takes the old value away (add, replace, append and cas keep
    // it); `ms` does in every mode. `$BIG` is 2 MiB, over the 1 MiB item limit.
    ("set big 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("set big 0 0 2097152\r\n$BIG\r\n", TOO_LARGE),
    ("get big\r\n", "END\r\n"),
    ("set big 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("set big 0 0 2097152 noreply\r\n$BIG\r\n", ""),
    ("get big\r\n", "END\r\n"),
    ("set big 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("add big 0 0 2097152\r\n$BIG\r\n", TOO_LARGE),
    ("replace big 0 0 2097152\r\n$BIG\r\n", TOO_LARGE),
    ("append big 0 0 2097152\r\n$BIG\r\n", TOO_LARGE),
    ("prepend big 0 0 2097152 noreply\r\n$BIG\r\n", ""),
    ("cas big 0 0 2097152 1\r\n$BIG\r\n", TOO_LARGE),
    ("get big\r\n", "VALUE big 0 1\r\nx\r\nEND\r\n"),
    ("ms big 2097152 ME q\r\n$BIG\r\n", TOO_LARGE),
    ("mg big v\r\n", "EN\r\n"),
    // delete: the legacy time must be 0; noreply silences the complaint too.
    ("set d 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("delete d 10 noreply\r\n", ""),
    ("delete d 10\r\n", DELETE_USAGE),
    ("delete d noreply 0\r\n", DELETE_USAGE),
    ("delete d 0 0\r\n", DELETE_USAGE),
    ("delete d 0\r\n", "DELETED\r\n"),
    ("delete d 0 noreply\r\n", ""),
    ("delete d noreply\r\n", ""),
    ("delete noreply\r\n", "NOT_FOUND\r\n"),
    ("delete\r\n", "ERROR\r\n"),
    ("delete d x y z\r\n", "ERROR\r\n"),
    ("delete d 0 noreply x\r\n", "ERROR\r\n"),
    (
        "delete $KEY251\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    ("delete $KEY251 noreply\r\n", ""),
    // Every meta command reads the same flags and ignores those it has no use for; its
    // complaints come in memcached's order: the key's length, an unknown or repeated flag,
    // then the last bad token (or base64 key) of the line, then the opaque's length. md and ma
    // word each of them as a bad flag.
    ("ms fl 1\r\nv\r\n", "HD\r\n"),
    ("mg fl C1 D1 I J1 M1 v\r\n", "VA 1\r\nv\r\n"),
    (
        "mg fl C\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg fl D\r\n",
        "CLIENT_ERROR invalid numeric delta value\r\n",
    ),
    (
        "mg fl J\r\n",
        "CLIENT_ERROR invalid numeric initial value\r\n",
    ),
    (
        "mg fl M\r\n",
        "CLIENT_ERROR incorrect length for M token\r\n",
    ),
    ("mg fl F\r\n", "CLIENT_ERROR bad command line format\r\n"),
    (
        "mg fl Nx Fx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg fl Fx Nx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg fl b Nx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    ("mg fl Nx b\r\n", "CLIENT_ERROR error decoding key\r\n"),
    ("mg fl Nx Z\r\n", "CLIENT_ERROR invalid flag\r\n"),
    (
        "mg fl Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx Z\r\n",
        "CLIENT_ERROR invalid flag\r\n",
    ),
    (
        "mg fl Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx Nx\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    (
        "mg fl Oxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n",
        "CLIENT_ERROR opaque token too long\r\n",
    ),
    (
        "mg $KEY251 Z\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    (
        "md $KEY251 Nx\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    ("md none c f h l s t u v Mx\r\n", "NF\r\n"),
    ("md c b\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n"),
    (
        "md none Nx\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    ("ma none I f h l s u\r\n", "NF\r\n"),
    (
        "ma none M\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    (
        "ma none Mxx\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    (
        "ma none Mx Nx\r\n",
        "CLIENT_ERROR invalid or duplicate flag\r\n",
    ),
    (
        "ms fl 1 MAx\r\nv\r\n",
        "CLIENT_ERROR incorrect length for M token\r\n",
    ),
    (
        "ms fl 1 Mx Nx\r\nv\r\n",
        "CLIENT_ERROR bad token in command line format\r\n",
    ),
    ("ms fl 1 f h l s t u v N1 D1 J1\r\nw\r\n", "HD\r\n"),
    ("mg fl v\r\n", "VA 1\r\nw\r\n"),
    // A key too long: memcached reads the data as commands.
    (
        "ms $KEY251 2\r\n-1\r\n",
        "CLIENT_ERROR bad command line format\r\nERROR\r\n",
    ),
    // ms with C: a set or a replace compares it (C0 too, which matches no item while CAS is
    // on), an add ignores it, an append compares a nonzero one; I turns a compare with an
    // older CAS into a stale store, and changes nothing else.
    ("ms cx 1 C0\r\nv\r\n", "NF\r\n"),
    ("ms cx 1 MR C1\r\nv\r\n", "NF\r\n"),
    ("ms cx 1 ME C1\r\nv\r\n", "HD\r\n"),
    ("ms cx 1 C0\r\nw\r\n", "EX\r\n"),
    ("ms cx 1 C0 I\r\nw\r\n", "EX\r\n"),
    ("ms cx 1 MA C0\r\nx\r\n", "HD\r\n"),
    ("ms cx 1 MA I C1\r\ny\r\n", "EX\r\n"),
    ("ms cx 1 ME I C1\r\ny\r\n", "NS\r\n"),
    ("mg cx v\r\n", "VA 2\r\nvx\r\n"),
    ("ms cy 1 MA I\r\nv\r\n", "NS\r\n"),
    ("ms cy 1 MR I\r\nv\r\n", "NS\r\n"),
    ("ms cy 1 I\r\nv\r\n", "HD\r\n"),
    ("mg cy v\r\n", "VA 1\r\nv\r\n"),
    ("ms cy 1 MR I C1\r\nw\r\n", "HD\r\n"),
    ("mg cy v\r\n", "VA 1 X W\r\nw\r\n"),
    // An incr or decr whose number fits the value's length rewrites the item in place in
    // memcached: it stays fetched (and stale); a longer number makes a new item. A touch is
    // a fetch.
    ("set hh 0 0 2\r\n12\r\n", "STORED\r\n"),
    ("get hh\r\n", "VALUE hh 0 2\r\n12\r\nEND\r\n"),
    ("incr hh 5\r\n", "17\r\n"),
    ("mg hh h\r\n", "HD h1\r\n"),
    ("incr hh 100\r\n", "117\r\n"),
    ("mg hh h\r\n", "HD h0\r\n"),
    ("set hh 0 0 2\r\n12\r\n", "STORED\r\n"),
    ("md hh I\r\n", "HD\r\n"),
    ("decr hh 1\r\n", "11\r\n"),
    ("mg hh v\r\n", "VA 2 X W\r\n11\r\n"),
    ("set hh 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("touch hh 100\r\n", "TOUCHED\r\n"),
    ("mg hh h\r\n", "HD h1\r\n"),
    // An empty value is no number, before the CAS is compared; a CAS that differs comes
    // before a value that is no number.
    ("set he 0 0 0\r\n\r\n", "STORED\r\n"),
    (
        "ma he C12345\r\n",
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    ),
    ("set he 0 0 1\r\nx\r\n", "STORED\r\n"),
    ("ma he C12345\r\n", "EX\r\n"),
    // An item N creates counts as fetched by the fetch that created it.
    ("mg hv N5 h\r\n", "HD h0 W\r\n"),
    ("mg hv h\r\n", "HD h1 Z\r\n"),
    // md with C0 matches no item while CAS is on either.
    ("md cx C0\r\n", "EX\r\n"),
    ("md cx C0 I\r\n", "EX\r\n"),
    ("md none C0\r\n", "NF\r\n"),
    ("mg cx v\r\n", "VA 2\r\nvx\r\n"),
    // mg takes t, T and (on an item it creates) N in the line's order.
    ("ms tt 1 T100\r\nx\r\n", "HD\r\n"),
    ("mg tt t T30\r\n", "HD t100\r\n"),
    ("mg tt T60 t\r\n", "HD t60\r\n"),
    ("mg tt t\r\n", "HD t60\r\n"),
    ("mg tn1 N50 T30 t\r\n", "HD t30 W\r\n"),
    ("mg tn1 t\r\n", "HD t30 Z\r\n"),
    ("mg tn2 T30 N50 t\r\n", "HD t50 W\r\n"),
    ("mg tn2 t\r\n", "HD t50 Z\r\n"),
    ("mg tn3 t N50\r\n", "HD t-1 W\r\n"),
    ("mg tn3 t\r\n", "HD t50 Z\r\n"),
    ("mg tn4 N50 t T30\r\n", "HD t50 W\r\n"),
    ("mg tn4 t\r\n", "HD t30 Z\r\n"),
    // So does ma (an item it creates had no expiry before).
    ("ms ta 1 T100\r\n5\r\n", "HD\r\n"),
    ("ma ta t T30\r\n", "HD t100\r\n"),
    ("ma ta T40 t\r\n", "HD t40\r\n"),
    ("ma ta N5 t\r\n", "HD t40\r\n"),
    ("ma tb t N50 MD\r\n", "HD t-1\r\n"),
    ("mg tb t v\r\n", "VA 1 t50\r\n0\r\n"),
    ("ma tc N50 T30 t\r\n", "HD t30\r\n"),
    ("mg tc t\r\n", "HD t30\r\n"),
    ("ma td T30 N50 t\r\n", "HD t50\r\n"),
    ("mg td t\r\n", "HD t50\r\n"),
    ("ma te T30 t N50 J7 v\r\n", "VA 1 t30\r\n7\r\n"),
    ("mg te t\r\n", "HD t50\r\n"),
    // me's exp is memcached's: the time since the expiry, negative while the item lives.
    ("me tt\r\n", "ME tt exp=-60 la=0 cas=* fetch=yes\r\n"),
];

const TOO_LARGE: &str = "SERVER_ERROR object too large for cache\r\n";
const DELETE_USAGE: &str =
    "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";

/// One connection that reads each answer up to the `MN` of an `mn` sent after its request.
struct Conn {
    stream: TcpStream,
    buffered: Vec<u8>,
    cas: String,
}

impl Conn {
    fn new(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        Conn {
            stream,
            buffered: Vec::new(),
            cas: String::new(),
        }
    }

    /// Sends `request` (its placeholders filled in) and returns its answer, CAS values masked.
    fn ask(&mut self, request: &str) -> String {
        let request = fill(&request.replace("$CAS", &self.cas));
        self.stream.write_all(request.as_bytes()).unwrap();
        self.stream.write_all(b"mn\r\n").unwrap();
        let at = loop {
            if let Some(at) = self.buffered.windows(4).position(|w| w == b"MN\r\n") {
                break at;
            }
            let mut chunk = [0; 4096];
            let n = self.stream.read(&mut chunk).expect("an answer in time");
            assert!(n > 0, "closed after {request:?}");
            self.buffered.extend_from_slice(&chunk[..n]);
        };
        let answer = String::from_utf8_lossy(&self.buffered[..at]).into_owned();
        self.buffered.drain(..at + 4);
        self.mask(&answer)
    }

    /// Replaces the CAS values of `answer` by `*`, remembering the last one.
    fn mask(&mut self, answer: &str) -> String {
        let mut out = String::new();
        for line in answer.split_inclusive("\r\n") {
            let body = line.trim_end_matches("\r\n");
            let meta = ["VA ", "HD", "EN", "NS", "EX", "NF"]
                .iter()
                .any(|code| body.starts_with(code));
            let debug = body.starts_with("ME ");
            let tokens: Vec<String> = body
                .split(' ')
                // memcached's slab class and item size, which our engines do not have.
                .filter(|t| !(debug && (t.starts_with("cls=") || t.starts_with("size="))))
                .enumerate()
                .map(|(i, t)| {
                    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                    if meta && i > 0 && t.starts_with('c') && number(&t[1..]) && t != "c0" {
                        self.cas = t[1..].to_string();
                        "c*".to_string()
                    } else if debug && t.starts_with("cas=") {
                        "cas=*".to_string()
                    } else if body.starts_with("VALUE ") && i == 4 {
                        self.cas = t.to_string();
                        "*".to_string()
                    } else {
                        t.to_string()
                    }
                })
                .collect();
            out.push_str(&tokens.join(" "));
            out.push_str(&line[body.len()..]);
        }
        out
    }
}

/// Runs the transcripts (meta, then the classic commands') against the server on `port`;
/// the mismatches.
fn replay(port: u16) -> Vec<String> {
    let mut conn = Conn::new(port);
    TRANSCRIPT
        .iter()
        .chain(classic::CLASSIC)
        .filter_map(|&(request, expected)| {
            let got = conn.ask(request);
            let expected = fill(expected);
            (got != expected).then(|| format!("{request:?}: expected {expected:?}, got {got:?}"))
        })
        .collect()
}

/// A transcript line with its placeholders filled in (but `$CAS`, which [`Conn::ask`] fills).
fn fill(text: &str) -> String {
    let mut text = text.to_owned();
    for (placeholder, byte, n) in [
        ("$BIG", "x", 2 << 20),
        ("$KEY251", "k", 251),
        ("$KEY250", "k", 250),
    ] {
        if text.contains(placeholder) {
            text = text.replace(placeholder, &byte.repeat(n));
        }
    }
    text
}

#[test]
fn meta_commands_answer_as_memcached_does() {
    let server = Server::start(&[]);
    let mismatches = replay(server.port);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn the_transcript_is_memcacheds() {
    let Some(memcached) = Memcached::start(&[], "the transcript") else {
        return;
    };
    let mismatches = replay(memcached.port);
    drop(memcached);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// Requests memcached 1.6.18 counts by rules of its own (a gat and `mg … T` hit count as
/// touches, `mg … T` misses as gets, an item `N` creates as a hit, `cmd_meta` only `me`, an incr
/// that creates, finds no number or a CAS that differs as neither hit nor miss, an in-place
/// touch, incr or invalidation as no new item, a refused `md` as a delete miss, a refused
/// flush_all as a flush, `ms … I` as a CAS store, a stale one as a hit, the keys of a get before
/// one too long as fetched), on a fresh server; then the counters memcached gives after them.
const COUNTED: &[&str] = &[
    "mg a v\r\n",
    "ms a 1\r\nx\r\n",
    "mg a v\r\n",
    "me a\r\n",
    "gat 0 a\r\n",
    "gat 0 b\r\n",
    "gats 0 a b\r\n",
    "touch a 0\r\n",
    "touch b 0\r\n",
    "mg a T10\r\n",
    "mg b T10\r\n",
    "mg new T10 N5\r\n",
    "mg new2 N5\r\n",
    "set n 0 0 1\r\n5\r\n",
    "incr n 1\r\n",
    "incr n 5\r\n",
    "decr n 1\r\n",
    "ma m N0\r\n",
    "incr m2 1\r\n",
    "set t 0 0 1\r\nx\r\n",
    "incr t 1\r\n",
    "ma t C99\r\n",
    "md x C0\r\n",
    "md x I\r\n",
    "md a C1\r\n",
    "md a C0\r\n",
    "md a I\r\n",
    "md a\r\n",
    "ms i 1 C6 I\r\nv\r\n",
    "set i 0 0 1\r\nx\r\n",
    "ms i 1 C1 I\r\nv\r\n",
    "ms i 1 C18446744073709551615 I\r\nv\r\n",
    "get n m2 $KEY251 n\r\n",
    "flush_all x\r\n",
    "flush_all\r\n",
];

const COUNTS: &[(&str, &str)] = &[
    ("cmd_get", "6"),
    ("get_hits", "3"),
    ("get_misses", "3"),
    ("cmd_touch", "8"),
    ("touch_hits", "5"),
    ("touch_misses", "3"),
    ("cmd_meta", "1"),
    ("incr_hits", "2"),
    ("incr_misses", "1"),
    ("decr_hits", "1"),
    ("decr_misses", "0"),
    ("delete_hits", "1"),
    ("delete_misses", "5"),
    ("cmd_flush", "2"),
    ("total_items", "9"),
    ("cas_hits", "1"),
    ("cas_misses", "1"),
    ("cas_badval", "1"),
];

/// The counters of [`COUNTS`] that differ on `port` after [`COUNTED`], worded.
fn miscounted(port: u16) -> Vec<String> {
    let mut conn = Conn::new(port);
    for request in COUNTED {
        conn.ask(request);
    }
    let stats = conn.ask("stats\r\n");
    COUNTS
        .iter()
        .filter_map(|&(name, want)| {
            let line = format!("STAT {name} {want}\r\n");
            (!stats.contains(&line)).then(|| format!("{name}: expected {want} in {stats}"))
        })
        .collect()
}

#[test]
fn the_counters_count_as_memcacheds() {
    let server = Server::start(&[]);
    let ours = miscounted(server.port);
    assert!(ours.is_empty(), "{}", ours.join("\n"));
    let Some(memcached) = Memcached::start(&[], "the counters") else {
        return;
    };
    let theirs = miscounted(memcached.port);
    drop(memcached);
    assert!(theirs.is_empty(), "{}", theirs.join("\n"));
}

/// The names of a stats group's answer on `port` (after storing one item), class numbers
/// replaced by `N`; and the line it ends with.
fn stat_names(port: u16, group: &str) -> (std::collections::BTreeSet<String>, String) {
    let mut conn = Conn::new(port);
    conn.ask("set one 0 0 1\r\nx\r\n");
    let answer = conn.ask(&format!("stats {group}\r\n"));
    let mut names = std::collections::BTreeSet::new();
    let mut end = String::new();
    for line in answer.lines() {
        let Some(stat) = line.strip_prefix("STAT ") else {
            end = line.to_owned();
            continue;
        };
        let name = stat.split(' ').next().unwrap_or_default();
        let name: Vec<&str> = name
            .split(':')
            .map(|part| match part.parse::<u32>() {
                Ok(_) => "N",
                Err(_) => part,
            })
            .collect();
        names.insert(name.join(":"));
    }
    (names, end)
}

/// The monitoring groups have memcached's shape: every name ours gives is one memcached 1.6.18
/// gives too (but ours alone, listed here), and each group ends as memcached's does.
#[test]
fn the_stats_groups_have_memcacheds_names() {
    let Some(memcached) = Memcached::start(&[], "the stats names") else {
        return;
    };
    let server = Server::start(&[]);
    for (group, ours_alone) in [
        (
            "",
            &[
                "mcb_version",
                "evictions_notified",
                "bucket_conns",
                "bucket_active_conns",
            ][..],
        ),
        ("settings", &["engine"]),
        ("items", &[]),
        ("slabs", &[]),
        ("conns", &[]),
        ("sizes", &[]),
    ] {
        let (theirs, their_end) = stat_names(memcached.port, group);
        let (ours, our_end) = stat_names(server.port, group);
        let unknown: Vec<&String> = ours
            .iter()
            .filter(|n| !theirs.contains(*n) && !ours_alone.contains(&n.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "stats {group}: not memcached's: {unknown:?}"
        );
        assert_eq!(our_end, their_end, "stats {group}");
        assert!(!ours.is_empty(), "stats {group} is empty");
    }
    drop(memcached);
}

const UNSUPPORTED: &str = "CLIENT_ERROR flag not supported by this engine\r\n";

/// Over an engine without our extension (the C test engine, serving directly), the flags that
/// need it get a CLIENT_ERROR and change nothing.
#[test]
fn without_stale_items_the_stampede_flags_are_refused() {
    let server = Server::start(&["-E", test_engine().to_str().unwrap(), "-e", "cache_size=1m"]);
    let mut conn = Conn::new(server.port);
    assert_eq!(conn.ask("ms foo 2\r\nab\r\n"), "HD\r\n");
    for request in [
        "mg new N30 v\r\n",
        "mg foo R30 v\r\n",
        "mg foo h\r\n",
        "mg foo l v\r\n",
        "ma foo C5\r\n",
        "ma foo T30\r\n",
        "ma foo t\r\n",
        "md foo I\r\n",
        "ms foo 2 I C1\r\nzz\r\n",
    ] {
        assert_eq!(conn.ask(request), UNSUPPORTED, "{request:?}");
    }
    assert_eq!(conn.ask("mg new v\r\n"), "EN\r\n");
    assert_eq!(conn.ask("mg foo v\r\n"), "VA 2\r\nab\r\n");
    // Nor does it keep a key's base64 mark: `ms … b` stores through v1, and `k` follows the
    // request's `b`.
    assert_eq!(conn.ask("ms Zm9v 2 b\r\ncd\r\n"), "HD\r\n");
    assert_eq!(conn.ask("mg foo k v\r\n"), "VA 2 kfoo\r\ncd\r\n");
    assert_eq!(conn.ask("mg Zm9v b k v\r\n"), "VA 2 kZm9v b\r\ncd\r\n");
}

/// Over an engine without GAT (the C test engine), `mg … T`, gat and gats say so; the rest
/// of the meta commands work through its v1 calls.
#[test]
fn without_gat_the_engine_cannot_touch_on_get() {
    let server = Server::start(&["-E", test_engine().to_str().unwrap(), "-e", "cache_size=1m"]);
    let mut conn = Conn::new(server.port);
    let unsupported = UNSUPPORTED;
    assert_eq!(conn.ask("ms foo 2 F3\r\nab\r\n"), "HD\r\n");
    assert_eq!(conn.ask("mg foo v f k\r\n"), "VA 2 f3 kfoo\r\nab\r\n");
    // v1 tells `me` no access time, and `ma` not whether `N` created the item (q hides it).
    assert_eq!(conn.ask("me foo\r\n"), "ME foo exp=-1 cas=*\r\n");
    assert_eq!(conn.ask("ma n N0 J7 q\r\n"), "");
    assert_eq!(conn.ask("ma n v\r\n"), "VA 1\r\n8\r\n");
    assert_eq!(conn.ask("mg foo T30 v\r\n"), unsupported);
    assert_eq!(conn.ask("gat 30 foo\r\n"), unsupported);
    assert_eq!(conn.ask("gats 30 foo\r\n"), unsupported);
    assert_eq!(conn.ask("md foo\r\n"), "HD\r\n");
    assert_eq!(conn.ask("mg foo v\r\n"), "EN\r\n");
}
