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
 * After Node 20, two flags that V8 reads at each collection rather than once, when the heap is
 * made, so the process can set them itself (the semi-space's maximum can only be set on Node's
 * command line). Node 20's V8 pays for both in CPU (7–32% more in a backfill of 1,000,000 reviews
 * for the first, 7–12% for the second), so it keeps its defaults. See docs/benchmarks.md#memory.
 *
 * V8 doubles its young generation whenever enough of it survives a scavenge, up to 64 MB on Node
 * 26 (the image's), and keeps it: most of the difference between a backfill's peak and its live
 * heap. A backfill's garbage dies young (a page's objects, gone once the page is written), so a
 * young generation that stays at its first size (1 MB per semi-space) collects it as cheaply: on
 * Node 26 that backfill peaked at 134–170 MB instead of 233–243, with no more CPU.
 *
 * What such a small young generation promotes, V8 then let grow to about 50 MB of old space
 * (a full collection keeps 23–25 MB) before collecting it, with 16–18 MB of buffers that dead
 * pages' objects still held: 161–165 MB at the peak. Collected once it has doubled what the last
 * collection kept, the same backfill peaked at 132–139 MB for the same CPU (seven alternating
 * pairs), and a backfill of 100,000 as before (112–115 MB).
 */
if (Number(process.versions.node.split('.')[0]) > 20) {
  setFlagsFromString('--semi-space-growth-factor=1');
  setFlagsFromString('--heap-growing-percent=100');
}
