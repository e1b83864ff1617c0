import { setFlagsFromString } from 'node:v8';

/**
 * Imported first by the CLI, before anything compiles WebAssembly. On Node 20, V8 recompiles the
 * platform client's HTTP parser (undici's llhttp, WebAssembly) with its optimizing tier once it is
 * hot, and that compile raises a process's peak memory by about 30 MB for good: a `sync` that
 * finds nothing new peaked at 116–122 MB instead of 85. The baseline tier (Liftoff) parses the
 * platform's answers with no measurable difference in speed (a 100,000-review backfill took the
 * same time and CPU either way, and the embedded database, WebAssembly too, was no slower), so
 * WebAssembly stays there. Node 26 does not make that compile here; the flag changes nothing
 * there. See docs/benchmarks.md#memory.
 */
setFlagsFromString('--liftoff-only');
