// A shared library that is no grain library: no GRANARY_GRAIN_LIBRARY.
extern "C" int granary_test_unrelated_function() { return 1; }
