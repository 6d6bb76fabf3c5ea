//! Bob Jenkins' SpookyHash V2 (public domain), the 64-bit result of its 128-bit hash, for Trino's
//! `spooky_hash_v2_32` and `spooky_hash_v2_64`. Messages under 192 bytes take the short path (four
//! 64-bit lanes); longer ones are mixed 96 bytes at a time into twelve lanes, and the last partial
//! block is zero-padded with its length in its final byte. Words are read little-endian.

const CONST: u64 = 0xdead_beef_dead_beef;
const LANES: usize = 12;
const BLOCK: usize = LANES * 8;
const SHORT: usize = 2 * BLOCK;

/// The 64-bit SpookyHash V2 of `data` with both seeds `seed` (Trino uses 0); the 32-bit hash is
/// its low half.
pub fn hash64(data: &[u8], seed: u64) -> u64 {
    if data.len() < SHORT {
        short(data, seed, seed).0
    } else {
        long(data, seed, seed).0
    }
}

fn word(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    u64::from_le_bytes(w)
}

fn short(data: &[u8], seed1: u64, seed2: u64) -> (u64, u64) {
    let mut h = [seed1, seed2, CONST, CONST];
    let mut rest = data;
    if data.len() > 15 {
        while rest.len() >= 32 {
            h[2] = h[2].wrapping_add(word(rest, 0));
            h[3] = h[3].wrapping_add(word(rest, 1));
            short_mix(&mut h);
            h[0] = h[0].wrapping_add(word(rest, 2));
            h[1] = h[1].wrapping_add(word(rest, 3));
            rest = &rest[32..];
        }
        if rest.len() >= 16 {
            h[2] = h[2].wrapping_add(word(rest, 0));
            h[3] = h[3].wrapping_add(word(rest, 1));
            short_mix(&mut h);
            rest = &rest[16..];
        }
    }
    h[3] = h[3].wrapping_add((data.len() as u64) << 56);
    if rest.is_empty() {
        h[2] = h[2].wrapping_add(CONST);
        h[3] = h[3].wrapping_add(CONST);
    } else {
        // The last 1 to 15 bytes, little-endian: the first eight into the third lane, the
        // others into the fourth (whose top byte already holds the length).
        let (low, high) = rest.split_at(rest.len().min(8));
        h[2] = h[2].wrapping_add(little_endian(low));
        h[3] = h[3].wrapping_add(little_endian(high));
    }
    short_end(&mut h);
    (h[0], h[1])
}

fn little_endian(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |acc, (i, b)| acc | (u64::from(*b) << (8 * i)))
}

fn short_mix(h: &mut [u64; 4]) {
    for (i, r) in [50, 52, 30, 41, 54, 48, 38, 37, 62, 34, 5, 36]
        .into_iter()
        .enumerate()
    {
        // Lanes rotate through (2, 3, 0), (3, 0, 1), (0, 1, 2), (1, 2, 3).
        let (x, y, z) = ((i + 2) % 4, (i + 3) % 4, i % 4);
        h[x] = h[x].rotate_left(r).wrapping_add(h[y]);
        h[z] ^= h[x];
    }
}

fn short_end(h: &mut [u64; 4]) {
    for (i, r) in [15, 52, 26, 51, 28, 9, 47, 54, 32, 25, 63]
        .into_iter()
        .enumerate()
    {
        // Lanes rotate through (3, 2), (0, 3), (1, 0), (2, 1).
        let (x, y) = ((i + 3) % 4, (i + 2) % 4);
        h[x] ^= h[y];
        h[y] = h[y].rotate_left(r);
        h[x] = h[x].wrapping_add(h[y]);
    }
}

fn long(data: &[u8], seed1: u64, seed2: u64) -> (u64, u64) {
    let mut h = [0u64; LANES];
    for (i, lane) in h.iter_mut().enumerate() {
        *lane = match i % 3 {
            0 => seed1,
            1 => seed2,
            _ => CONST,
        };
    }
    let whole = data.len() / BLOCK * BLOCK;
    for block in data[..whole].chunks_exact(BLOCK) {
        mix(block, &mut h);
    }
    let rest = &data[whole..];
    let mut last = [0u8; BLOCK];
    last[..rest.len()].copy_from_slice(rest);
    last[BLOCK - 1] = rest.len() as u8;
    for (i, lane) in h.iter_mut().enumerate() {
        *lane = lane.wrapping_add(word(&last, i));
    }
    for _ in 0..3 {
        end_partial(&mut h);
    }
    (h[0], h[1])
}

fn mix(block: &[u8], s: &mut [u64; LANES]) {
    const ROTATIONS: [u32; LANES] = [11, 32, 43, 31, 17, 28, 39, 57, 55, 54, 22, 46];
    for (i, r) in ROTATIONS.into_iter().enumerate() {
        s[i] = s[i].wrapping_add(word(block, i));
        s[(i + 2) % LANES] ^= s[(i + 10) % LANES];
        s[(i + 11) % LANES] ^= s[i];
        s[i] = s[i].rotate_left(r);
        s[(i + 11) % LANES] = s[(i + 11) % LANES].wrapping_add(s[(i + 1) % LANES]);
    }
}

fn end_partial(h: &mut [u64; LANES]) {
    const ROTATIONS: [u32; LANES] = [44, 15, 34, 21, 38, 33, 10, 13, 38, 53, 42, 54];
    for (i, r) in ROTATIONS.into_iter().enumerate() {
        let (a, b, c) = ((i + 11) % LANES, (i + 1) % LANES, (i + 2) % LANES);
        h[a] = h[a].wrapping_add(h[b]);
        h[c] ^= h[a];
        h[b] = h[b].rotate_left(r);
    }
}

#[cfg(test)]
mod tests {
    use super::hash64;

    /// Jenkins' published 32-bit results for messages of `i` bytes `i + 128`, seed 0, at lengths
    /// on both sides of the short path's limit (192 bytes) and of the 96-byte blocks.
    #[test]
    fn matches_the_reference_results() {
        let buf: Vec<u8> = (0..512).map(|i| (i + 128) as u8).collect();
        for (len, expected) in [
            (0, 0x6bf5_0919_u32),
            (1, 0x70de_1d26),
            (7, 0xf9f1_a233),
            (8, 0xee19_3982),
            (15, 0x83ec_01f9),
            (16, 0xf274_736c),
            (31, 0x027b_ca7c),
            (32, 0xe5cf_c8b6),
            (63, 0x09c1_afb4),
            (191, 0xe13d_9e19),
            (192, 0x77e0_12bd),
            (255, 0x2f40_ee0b),
            (256, 0x38ce_bf03),
            (300, 0x37e2_b1da),
            (511, 0xcc1c_8250),
        ] {
            assert_eq!(hash64(&buf[..len], 0) as u32, expected, "{len} bytes");
        }
    }

    /// Trino's own results (`spooky_hash_v2_64('')`, `spooky_hash_v2_64('hello')`).
    #[test]
    fn matches_trino() {
        assert_eq!(hash64(b"", 0), 0x2327_06fc_6bf5_0919);
        assert_eq!(hash64(b"hello", 0), 0x3768_826a_d382_e6ca);
    }
}
