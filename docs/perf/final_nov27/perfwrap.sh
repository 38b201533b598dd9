#!/bin/bash
exec perf record -F 20000 -o perf8.$PMI_RANK.data "$@"
