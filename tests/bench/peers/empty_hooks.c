/* Empty -finstrument-functions hooks in a shared library, so that
 * LD_PRELOAD'ed hooks (LTTng-UST's, uftrace's libmcount) take their place. */
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void* site) {
  __asm__ volatile("" : : "r"(fn), "r"(site) : "memory");
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void* fn, void* site) {
  __asm__ volatile("" : : "r"(fn), "r"(site) : "memory");
}
