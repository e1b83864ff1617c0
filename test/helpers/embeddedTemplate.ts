import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { inject } from 'vitest';
import type { TestProject } from 'vitest/node';

/**
 * A new embedded database runs initdb, seconds of WebAssembly each time, and the suite opens
 * hundreds. One is made per test run (vitest's globalSetup, below) and copied instead: as a data
 * directory for the processes a test starts, as a dump for the in-memory ones. Nothing is in it
 * but what initdb writes, so a copy is what a new one would be.
 */
export default async function makeEmbeddedTemplate(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), 'rm-template-'));
  const db = new PGlite(join(dir, 'pgdata'));
  await db.waitReady;
  const image = await db.dumpDataDir('none');
  await db.close();
  await writeFile(join(dir, 'image.tar'), Buffer.from(await image.arrayBuffer()));
  project.provide('embeddedTemplate', dir);
  return () => rm(dir, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** The directory of the run's template: `pgdata/` and its dump `image.tar`. */
    embeddedTemplate: string;
  }
}

let image: Promise<Blob> | undefined;

/** The template as a dump, for `openDb`'s `embeddedImage`: read once per test process. */
export function embeddedImage(): Promise<Blob> {
  image ??= readFile(join(inject('embeddedTemplate'), 'image.tar')).then((bytes) => new Blob([bytes]));
  return image;
}

/**
 * Puts a copy of the template where `DATA_DIR=dataDir` keeps its embedded database, as if a
 * command had already created it there; `dataDir` is returned. Only for tests not about a
 * directory's first use.
 */
export async function seededDataDir(dataDir: string): Promise<string> {
  await cp(join(inject('embeddedTemplate'), 'pgdata'), join(dataDir, 'pgdata'), { recursive: true });
  return dataDir;
}
