import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

interface LockEntry {
  version?: string;
  dev?: boolean;
  engines?: { node?: string };
  optionalDependencies?: Record<string, string>;
}

const read = <T>(path: string): T => JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as T;
const lock = read<{ packages: Record<string, LockEntry> }>('../../package-lock.json');

/**
 * `npm ci` refuses a lockfile that lacks an entry for any optional dependency, even one for
 * another platform. The registry mirror this project is built from lacks some platforms' builds
 * of some releases (npm install then silently leaves them out), so Biome is pinned and Rollup
 * overridden to releases whose every platform build is there. This says so before CI does.
 */
describe('package-lock.json', () => {
  it('has an entry for every optional (platform) dependency, so `npm ci` accepts it', () => {
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

  /**
   * npm only warns about a dependency whose `engines` excludes the running Node, and a release
   * that drops Node 20 can arrive as a transitive update (cookie 2 through Fastify's
   * light-my-request did; it is overridden to cookie 1.1.1). Every package that ships must
   * declare support for both ends: the oldest Node package.json admits, and the image's line.
   */
  it("holds only runtime packages that declare support for the oldest Node we admit and the image's", () => {
    const ours = read<{ engines: { node: string } }>('../../package.json').engines.node;
    const oldest = semver.minVersion(ours)?.version;
    const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
    const imageMajor = [...dockerfile.matchAll(/^FROM node:(\d+)/gm)].at(-1)?.[1];
    expect(oldest).toBeDefined();
    expect(imageMajor).toBeDefined();
    const refusing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = entry.engines?.node;
      if (path === '' || entry.dev || range === undefined) continue;
      for (const node of [oldest!, `${imageMajor}.0.0`]) {
        if (!semver.satisfies(node, range))
          refusing.push(`${path}@${entry.version} wants ${range}, not ${node}`);
      }
    }
    expect(refusing).toEqual([]);
  });
});
