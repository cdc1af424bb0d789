/* Built twice by tools/bench-peers.sh: plain_leaf() without instrumentation
 * (-DLEAF=plain_leaf) and traced_leaf() with the flags under test. */
__attribute__((noinline)) int LEAF(int x) {
  __asm__ volatile("" : "+r"(x));
  return x * 3 + 1;
}
