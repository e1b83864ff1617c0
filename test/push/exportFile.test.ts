import { execFileSync } from 'node:child_process';
import { lstat, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openExport } from '../../src/push/exportFile.js';
import { RecordFileError } from '../../src/push/readRecords.js';

/**
 * The inbox checks an export when it takes it and reads it later by name: whoever may write to
 * the inbox must not be able to swap in a link or another file meanwhile and have the daemon read
 * it. Real files, links and a named pipe in a temporary directory.
 */
describe('openExport', () => {
  let dir: string;
  let path: string;
  let secret: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rm-export-file-'));
    path = join(dir, 'contacts.csv');
    secret = join(dir, 'secret.txt');
    await writeFile(path, 'email\na@example.com\n');
    await writeFile(secret, 'email\nnot-for-the-platform@example.com\n');
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the file taken, and gives its size', async () => {
    const taken = await lstat(path);
    const { bytes, size } = await openExport(path, taken);
    expect(size).toBe(taken.size);
    expect(await text(bytes)).toBe('email\na@example.com\n');
  });

  it('refuses a symbolic link put in its place since, without reading its target', async () => {
    const taken = await lstat(path);
    await rm(path);
    await symlink(secret, path);
    const error = await openExport(path, taken).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordFileError);
    expect((error as Error).message).toMatch(/replaced by a symbolic link after the inbox took it/);
  });

  it('refuses another file renamed over it since', async () => {
    const taken = await lstat(path);
    await rename(secret, path);
    const error = await openExport(path, taken).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordFileError);
    expect((error as Error).message).toMatch(/replaced by another file after the inbox took it/);
  });

  it('refuses a named pipe put in its place at once, instead of waiting for a writer', async () => {
    const taken = await lstat(path);
    await rm(path);
    execFileSync('mkfifo', [path]);
    const error = await openExport(path, taken).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RecordFileError);
    expect((error as Error).message).toMatch(/replaced by another file/);
  });

  it('says why a file gone since cannot be read', async () => {
    const taken = await lstat(path);
    await rm(path);
    await expect(openExport(path, taken)).rejects.toThrow(/the file cannot be read \(ENOENT\)/);
  });

  it('follows a link an operator names on the command line (no file taken to compare with)', async () => {
    const link = join(dir, 'latest.csv');
    await symlink(path, link);
    const { bytes } = await openExport(link);
    expect(await text(bytes)).toBe('email\na@example.com\n');
  });
});
