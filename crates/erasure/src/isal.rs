//! The few ISA-L functions the code needs, made safe: GF(2⁸) arithmetic (polynomial 0x11D)
//! and the vectorised products of a coefficient matrix with whole shards. This is the only
//! module of the workspace that calls C directly.
#![allow(unsafe_code)]

use erasure_isa_l_sys as sys;

/// `a × b` in GF(2⁸).
pub fn mul(a: u8, b: u8) -> u8 {
    // SAFETY: a pure function of two bytes.
    unsafe { sys::gf_mul(a, b) }
}

/// The inverse of the `n × n` matrix `matrix` (row-major), or `None` if it is singular.
pub fn invert(matrix: &[u8], n: usize) -> Option<Vec<u8>> {
    assert_eq!(matrix.len(), n * n, "an n × n matrix");
    let mut scratch = matrix.to_vec();
    let mut inverse = vec![0; n * n];
    let n = i32::try_from(n).expect("a code has at most 256 shards");
    // SAFETY: gf_invert_matrix reads and overwrites the n² bytes of `scratch` and writes the
    // n² bytes of `inverse`; both are that long.
    let singular = unsafe { sys::gf_invert_matrix(scratch.as_mut_ptr(), inverse.as_mut_ptr(), n) } != 0;
    (!singular).then_some(inverse)
}

/// A `rows × k` coefficient matrix expanded into ISA-L's multiplication tables.
pub struct Products {
    k: usize,
    rows: usize,
    tables: Vec<u8>,
}

impl Products {
    /// Tables for `coefficients`, a `rows × k` matrix in row-major order.
    pub fn new(coefficients: &[u8], rows: usize, k: usize) -> Products {
        assert_eq!(coefficients.len(), rows * k, "a rows × k matrix");
        let mut tables = vec![0; 32 * k * rows];
        // SAFETY: ec_init_tables reads the rows × k coefficients (it does not write them,
        // whatever its signature says) and writes 32 bytes of tables for each.
        unsafe { sys::ec_init_tables(c_int(k), c_int(rows), coefficients.as_ptr().cast_mut(), tables.as_mut_ptr()) };
        Products { k, rows, tables }
    }

    /// Writes into each `outputs[r]` the bytewise sum over `j` of `coefficients[r][j] ×
    /// sources[j]`. There must be `k` sources and `rows` outputs, all of one length.
    pub fn apply(&self, sources: &[&[u8]], outputs: &mut [&mut [u8]]) {
        assert_eq!((sources.len(), outputs.len()), (self.k, self.rows), "k sources, rows outputs");
        let len = sources.first().map_or(0, |s| s.len());
        assert!(
            sources.iter().all(|s| s.len() == len) && outputs.iter().all(|o| o.len() == len),
            "sources and outputs of one length"
        );
        let mut sources: Vec<*mut u8> = sources.iter().map(|s| s.as_ptr().cast_mut()).collect();
        let mut outputs: Vec<*mut u8> = outputs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        // SAFETY: ec_encode_data reads `len` bytes from each of the k sources (never writing
        // them) and writes `len` bytes to each of the `rows` outputs. All have that length
        // (asserted above); the outputs come from distinct `&mut` borrows, so none overlaps
        // another or a source; the tables hold 32 × k × rows bytes (made in `new`).
        unsafe {
            sys::ec_encode_data(
                c_int(len),
                c_int(self.k),
                c_int(self.rows),
                self.tables.as_ptr().cast_mut(),
                sources.as_mut_ptr(),
                outputs.as_mut_ptr(),
            )
        }
    }
}

/// A count or length as C's `int`; the callers keep them far below its limit.
fn c_int(n: usize) -> i32 {
    i32::try_from(n).expect("shards shorter than 2 GiB and at most 256 of them")
}
