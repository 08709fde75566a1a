# shellcheck shell=bash
# The one ccache setting of every script that compiles (build, sanitize, fuzz,
# thread-safety-check): sourced after `root` (the checkout) is set. Paths are hashed relative
# to the checkout and the working directory is not hashed, so clones in other folders and every
# build directory (the main build, one per sanitizer, the fuzz build) share the cache. The
# precompiled LibTorch header is cacheable only with this sloppiness: without it every
# compile that uses the header in a sanitizer build was a miss ("could not use precompiled
# header" in `ccache -s -v`).
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-10G}
