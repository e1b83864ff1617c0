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

/**
 * V8 doubles its young generation whenever enough of it survives a scavenge, up to 64 MB on Node
 * 26 (the image's), and keeps it: most of the difference between a backfill's peak and its live
 * heap. A backfill's garbage dies young (a page's objects, gone once the page is written), so a
 * young generation that stays at its first size (1 MB per semi-space) collects it as cheaply: on
 * Node 26 a backfill of 1,000,000 reviews peaked at 134–170 MB instead of 233–243, with no more
 * CPU. Node 20's V8 pays for it (7–32% more CPU in the same backfill, for a peak of 111–129 MB
 * instead of 131–155), so it keeps its default. The semi-space's maximum is read once, when the
 * heap is made, and can only be set on Node's command line; its growth factor is read at each
 * growth, so the process can set it itself. See docs/benchmarks.md#memory.
 */
if (Number(process.versions.node.split('.')[0]) > 20) setFlagsFromString('--semi-space-growth-factor=1');
