//! The protobuf wire format at the lowest level: a bounds-checked reader over a byte slice
//! yielding field keys, varints, fixed-width values and length-delimited payloads.

use super::error::ProtobufError;

/// How a field's value is laid out on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WireType {
    /// A base-128 varint (int32, int64, bool, ...).
    Varint,
    /// Eight little-endian bytes (double, fixed64).
    Fixed64,
    /// A varint length followed by that many bytes (string, bytes, messages, packed arrays).
    Len,
    /// Four little-endian bytes (float, fixed32).
    Fixed32,
}

impl WireType {
    /// The protobuf number of this wire type, for error messages.
    pub(super) fn number(self) -> u8 {
        match self {
            WireType::Varint => 0,
            WireType::Fixed64 => 1,
            WireType::Len => 2,
            WireType::Fixed32 => 5,
        }
    }
}

/// A cursor over one encoded message.
pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Whether every byte has been consumed.
    pub(super) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads one base-128 varint (at most ten bytes).
    pub(super) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(ProtobufError::TruncatedVarint { offset: start });
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::VarintTooLong { offset: start })
    }

    /// Reads the next field key, or `None` at the end of the message.
    pub(super) fn key(&mut self) -> Result<Option<(u32, WireType)>, ProtobufError> {
        if self.is_empty() {
            return Ok(None);
        }
        let offset = self.pos;
        let key = self.varint()?;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(ProtobufError::InvalidFieldNumber { offset });
        }
        let wire = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            other => {
                return Err(ProtobufError::UnsupportedWireType { wire_type: other as u8, offset });
            }
        };
        Ok(Some((field as u32, wire)))
    }

    /// Reads a length-delimited payload.
    pub(super) fn len_delimited(&mut self) -> Result<&'a [u8], ProtobufError> {
        let offset = self.pos;
        let len = self.varint()?;
        let remaining = self.buf.len() - self.pos;
        if len > remaining as u64 {
            return Err(ProtobufError::Truncated { offset, needed: len, remaining });
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok(&self.buf[start..self.pos])
    }

    /// Reads `N` raw bytes (fixed32/fixed64 payloads).
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], ProtobufError> {
        let remaining = self.buf.len() - self.pos;
        let Some(bytes) = self.buf.get(self.pos..self.pos + N) else {
            return Err(ProtobufError::Truncated { offset: self.pos, needed: N as u64, remaining });
        };
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        self.pos += N;
        Ok(out)
    }

    /// Reads a little-endian 64-bit value.
    pub(super) fn fixed64(&mut self) -> Result<u64, ProtobufError> {
        self.fixed::<8>().map(u64::from_le_bytes)
    }

    /// Reads a little-endian 32-bit value.
    pub(super) fn fixed32(&mut self) -> Result<u32, ProtobufError> {
        self.fixed::<4>().map(u32::from_le_bytes)
    }

    /// Skips one value of the given wire type (an unknown field).
    pub(super) fn skip(&mut self, wire: WireType) -> Result<(), ProtobufError> {
        match wire {
            WireType::Varint => self.varint().map(drop),
            WireType::Fixed64 => self.fixed64().map(drop),
            WireType::Len => self.len_delimited().map(drop),
            WireType::Fixed32 => self.fixed32().map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_decode_and_report_truncation() {
        let mut r = Reader::new(&[0x96, 0x01, 0x00]);
        assert_eq!(r.varint().unwrap(), 150);
        assert_eq!(r.varint().unwrap(), 0);
        assert!(r.is_empty());
        let mut r = Reader::new(&[0x80, 0x80]);
        assert!(matches!(r.varint(), Err(ProtobufError::TruncatedVarint { offset: 0 })));
        let mut r = Reader::new(&[0xff; 11]);
        assert!(matches!(r.varint(), Err(ProtobufError::VarintTooLong { .. })));
        // -1 as int32 is sign-extended to ten bytes.
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(r.varint().unwrap() as i64, -1);
    }

    #[test]
    fn keys_and_lengths_are_checked() {
        let mut r = Reader::new(&[0x0a, 0x02, b'h', b'i', 0x10, 0x05]);
        assert_eq!(r.key().unwrap(), Some((1, WireType::Len)));
        assert_eq!(r.len_delimited().unwrap(), b"hi");
        assert_eq!(r.key().unwrap(), Some((2, WireType::Varint)));
        r.skip(WireType::Varint).unwrap();
        assert_eq!(r.key().unwrap(), None);

        let mut r = Reader::new(&[0x0a, 0x05, b'h']);
        r.key().unwrap();
        assert!(matches!(r.len_delimited(), Err(ProtobufError::Truncated { needed: 5, remaining: 1, .. })));
        assert!(matches!(Reader::new(&[0x0b]).key(), Err(ProtobufError::UnsupportedWireType { wire_type: 3, .. })));
        assert!(matches!(Reader::new(&[0x02]).key(), Err(ProtobufError::InvalidFieldNumber { .. })));
        assert!(matches!(Reader::new(&[1, 2, 3]).fixed64(), Err(ProtobufError::Truncated { .. })));
    }
}
