import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

interface LockEntry {
  version?: string;
  optionalDependencies?: Record<string, string>;
}

/**
 * `npm ci` refuses a lockfile that lacks an entry for any optional dependency, even one for
 * another platform. The registry mirror this project is built from lacks some platforms' builds
 * of some releases (npm install then silently leaves them out), so Biome is pinned and Rollup
 * overridden to releases whose every platform build is there. This says so before CI does.
 */
describe('package-lock.json', () => {
  it('has an entry for every optional (platform) dependency, so `npm ci` accepts it', () => {
    const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
      packages: Record<string, LockEntry>;
    };
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const dep of Object.keys(entry.optionalDependencies ?? {})) {
        const nested = `${path}/node_modules/${dep}`;
        if (!lock.packages[nested] && !lock.packages[`node_modules/${dep}`])
          missing.push(`${path} -> ${dep}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
