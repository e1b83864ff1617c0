import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { envSchema, parseConfig } from '../../src/config/schema.js';

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

/** `NAME=value` lines of an env file (what `docker run --env-file` reads: no quoting, # comments). */
function envFile(text: string): Record<string, string> {
  const vars: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const at = line.indexOf('=');
    vars[line.slice(0, at)] = line.slice(at + 1);
  }
  return vars;
}

describe('the documented configuration', () => {
  const variables = Object.keys(envSchema.shape).sort();

  it('config/review-mirror.env.example lists every variable with its default, and parses', () => {
    const example = envFile(read('config/review-mirror.env.example'));
    expect(Object.keys(example).sort()).toEqual(variables);
    expect(loadConfig(example)).toEqual(parseConfig({}));
  });

  it('README.md has a row for every variable', () => {
    const readme = read('README.md');
    for (const name of variables) expect(readme, name).toMatch(new RegExp(`\\| [^|\\n]*\`${name}\``));
  });
});
