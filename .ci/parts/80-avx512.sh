# The SIMD kernels' own tests, each on a CPU that has its instructions: the AVX2 dot products
# against the portable ones; the 16-lane exp against the scalar one bit for bit and the tile
# transposes (AVX-512F). (The default test run reaches the attention kernels of this CPU through
# the dispatch.) Where the CPU lacks the instructions they cannot run, and this part says so.
# `--workspace`: the README command's feature set, so its build is reused (`-p rlprof-trainer`
# alone resolves features apart and rebuilt four crates, a minute).
simd_test() { cargo test --release --workspace --lib -- --ignored --exact "$1"; }
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  simd_test model::kernels::simd::tests::avx2_dot_matches_the_portable_dot
else
  echo "no AVX2 + FMA on this CPU: the AVX2 dot product test is not run"
fi
if grep -qw avx512f /proc/cpuinfo; then
  simd_test model::kernels::simd::tests::sixteen_lane_exp_equals_the_scalar_exp_bit_for_bit
  simd_test model::kernels::attention::avx512_tests::tile_transposes_copy_every_shape
else
  echo "no AVX-512F on this CPU: the AVX-512 exp and tile transpose tests are not run"
fi
