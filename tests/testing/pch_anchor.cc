// The one source of a test precompiled-header library (retort_add_test_pch in
// tests/CMakeLists.txt): the library exists for its header, and CMake wants a source to build it.
