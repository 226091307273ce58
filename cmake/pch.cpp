// The translation unit that owns the precompiled standard headers
// (CMakeLists.txt, MEMTL_PCH); it defines nothing.
