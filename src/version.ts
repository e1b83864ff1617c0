import { existsSync, readFileSync } from 'node:fs';

/**
 * This build's version, from package.json: beside `src/` when run from the sources (tests), two
 * levels up from `dist/src/` when built.
 */
function readVersion(): string {
  for (const relative of ['../package.json', '../../package.json']) {
    const url = new URL(relative, import.meta.url);
    if (!existsSync(url)) continue;
    const { name, version } = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version?: string };
    if (name === 'review-mirror' && typeof version === 'string') return version;
  }
  return 'unknown';
}

export const VERSION = readVersion();
