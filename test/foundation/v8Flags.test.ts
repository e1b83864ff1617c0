import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const V8_FLAGS = fileURLToPath(new URL('../../dist/src/v8Flags.js', import.meta.url));

/**
 * Allocates 200 MB in short-lived objects, a fifth of them kept for a while (as a page's rows are
 * until the page is written), and prints the young generation's size in MB afterwards.
 */
const CHURN = `
  import { getHeapSpaceStatistics } from 'node:v8';
  let kept = [];
  for (let i = 0; i < 2_000_000; i++) {
    const row = { id: i, text: 'review ' + i, tags: [i, i + 1] };
    if (i % 5 === 0) kept.push(row);
    if (kept.length > 50_000) kept = [];
  }
  const young = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  console.log(young.space_size / 1e6);
`;

async function youngGenerationMb(preamble: string): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--input-type=module',
    '--eval',
    `${preamble}\n${CHURN}`,
  ]);
  return Number(stdout.trim());
}

/**
 * This Node honours, at run time, the flags the CLI sets before anything else (src/v8Flags.ts):
 * after Node 20 the young generation stays at its first size; on Node 20 it grows as by default.
 */
describe("the CLI's V8 flags", () => {
  it('keep the young generation at its first size after Node 20, where it would otherwise grow', async () => {
    const [without, withFlags] = await Promise.all([
      youngGenerationMb(''),
      youngGenerationMb(`import ${JSON.stringify(V8_FLAGS)};`),
    ]);
    expect(without).toBeGreaterThan(8);
    if (Number(process.versions.node.split('.')[0]) > 20) expect(withFlags).toBeLessThanOrEqual(4);
    else expect(withFlags).toBe(without);
  });
});
