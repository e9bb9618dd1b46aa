//! A compact byte form for the items the in-memory adapters keep (the ledger's records, the
//! reminders table's items): the embedded pipeline holds a million of each, and a typed item
//! costs several times its content in pointers, string headers and B-tree nodes. Writing one is
//! about the cost of the clone the adapter made before, and so is reading one back.
//!
//! The form is private to this process (never persisted, never sent): integers as LEB128
//! (signed ones zigzagged), strings length-prefixed, an enum's known wire strings as their
//! index. Each item type's field order lives beside the type ([`crate::ledger`]'s record,
//! [`crate::ports`]' reminders), read back in the same order; a reader that runs out of bytes
//! or finds one it did not write answers `None`.

use crate::clock::Timestamp;

/// Builds one item's bytes.
#[derive(Debug, Default)]
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self(Vec::with_capacity(n))
    }

    pub(crate) fn u64(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    pub(crate) fn i64(&mut self, v: i64) {
        self.u64(((v << 1) ^ (v >> 63)) as u64);
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }

    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }

    pub(crate) fn time(&mut self, t: Timestamp) {
        self.i64(t.as_millis());
    }

    /// An enum value: its index in `known` (one byte), else its wire string `text` (a value
    /// a newer version wrote, which the reader makes its `Unknown` case again).
    pub(crate) fn code<T: PartialEq>(&mut self, v: &T, known: &[T], text: &str) {
        match known.iter().position(|k| k == v) {
            Some(i) => self.u64(i as u64 + 1),
            None => {
                self.u64(0);
                self.str(text);
            }
        }
    }

    /// A present flag, then the value when there is one.
    pub(crate) fn opt<T>(&mut self, v: Option<T>, put: impl FnOnce(&mut Self, T)) {
        self.bool(v.is_some());
        if let Some(v) = v {
            put(self, v);
        }
    }

    /// The bytes, in an allocation of their exact size. Not the buffer shrunk in place: that
    /// leaves a small free fragment beside each long-lived item, and with a million of them
    /// glibc's allocator spent most of the 1M demo sorting fragments.
    pub(crate) fn finish(self) -> Box<[u8]> {
        Box::from(self.0.as_slice())
    }
}

/// Reads one item's bytes back, in the order they were written.
#[derive(Debug)]
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self(bytes)
    }

    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f).checked_shl(shift)?;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    pub(crate) fn i64(&mut self) -> Option<i64> {
        let z = self.u64()?;
        Some(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    pub(crate) fn bool(&mut self) -> Option<bool> {
        match self.byte()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }

    pub(crate) fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.u64()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        std::str::from_utf8(s).ok()
    }

    pub(crate) fn string(&mut self) -> Option<String> {
        self.str().map(str::to_owned)
    }

    pub(crate) fn time(&mut self) -> Option<Timestamp> {
        self.i64().map(Timestamp::from_millis)
    }

    /// A value written by [`Writer::code`] with the same `known`: the known one, or the
    /// wire string of one this version does not know (`Err`).
    pub(crate) fn code<T: Copy>(&mut self, known: &[T]) -> Option<Result<T, &'a str>> {
        match self.u64()? {
            0 => self.str().map(Err),
            i => known.get(usize::try_from(i - 1).ok()?).copied().map(Ok),
        }
    }

    /// A value written by [`Writer::opt`]: `None` when the bytes are not one, `Some(None)` for
    /// an absent value.
    pub(crate) fn opt<T>(&mut self, get: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.bool()? {
            false => Some(None),
            true => get(self).map(Some),
        }
    }

    /// Every byte was read: the item ends where its writer stopped.
    pub(crate) fn end(self) -> Option<()> {
        self.0.is_empty().then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_reads_back_as_written_and_a_cut_item_reads_as_none() {
        let known = ["delivered", "dead"];
        let mut w = Writer::default();
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            w.u64(v);
        }
        for v in [0, -1, 1, i64::MIN, i64::MAX, 1_800_000_000_000] {
            w.i64(v);
        }
        w.str("");
        w.str("héllo");
        w.code(&"dead", &known, "dead");
        w.code(&"from_a_newer_version", &known, "from_a_newer_version");
        w.opt(None::<u64>, Writer::u64);
        w.opt(Some(7u64), Writer::u64);
        w.time(Timestamp::from_millis(-5));
        let bytes = w.finish();

        let mut r = Reader::new(&bytes);
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(r.u64(), Some(v));
        }
        for v in [0, -1, 1, i64::MIN, i64::MAX, 1_800_000_000_000] {
            assert_eq!(r.i64(), Some(v));
        }
        assert_eq!(r.str(), Some(""));
        assert_eq!(r.str(), Some("héllo"));
        assert_eq!(r.code(&known), Some(Ok("dead")));
        assert_eq!(r.code(&known), Some(Err("from_a_newer_version")));
        assert_eq!(r.opt(Reader::u64), Some(None));
        assert_eq!(r.opt(Reader::u64), Some(Some(7)));
        assert_eq!(r.time(), Some(Timestamp::from_millis(-5)));
        assert_eq!(r.end(), Some(()));

        // One byte short: the last value does not read, nothing panics.
        let mut cut = Reader::new(&bytes[..bytes.len() - 1]);
        for _ in 0..6 {
            cut.u64();
        }
        for _ in 0..6 {
            cut.i64();
        }
        let _ = (cut.str(), cut.str(), cut.code(&known), cut.code(&known));
        let _ = (cut.opt(Reader::u64), cut.opt(Reader::u64));
        assert_eq!(cut.time(), None);
    }
}
