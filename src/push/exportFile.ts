import { constants, createReadStream, type ReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { RecordFileError } from './readRecords.js';

/** Which file a path named when it was looked at (an lstat's `dev` and `ino`). */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
}

/** An export opened for reading: its bytes, read once, and its size when opened. */
export interface OpenedExport {
  readonly bytes: ReadStream;
  readonly size: number;
}

/**
 * Opens the export at `path`. Given `sameAs`, only that very file is read: the inbox checked it
 * (a regular file, not a link) when it took it, and reads it later by name, so whoever may write to
 * the inbox could otherwise put a symbolic link in its place meanwhile and have the daemon read,
 * and report rows of, any file the daemon may read. So the link is not followed (`O_NOFOLLOW`),
 * and a file that is no longer the one taken (another inode, or no longer a regular file) is
 * refused; the bytes are read from the descriptor checked, never by name again. `O_NONBLOCK` lets
 * a pipe put there be refused instead of waiting for a writer. Without `sameAs` (a file an
 * operator names on the command line) the path is read as it is, links followed, as before.
 */
export async function openExport(path: string, sameAs?: FileIdentity): Promise<OpenedExport> {
  if (sameAs === undefined) {
    const { size } = await stat(path);
    return { bytes: createReadStream(path), size };
  }
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    (error: NodeJS.ErrnoException) => {
      throw new RecordFileError(
        error.code === 'ELOOP'
          ? 'it was replaced by a symbolic link after the inbox took it: not followed, nothing of it read'
          : `the file cannot be read (${error.code ?? error.message})`,
        { cause: error },
      );
    },
  );
  try {
    const stats = await handle.stat();
    if (!stats.isFile() || stats.dev !== sameAs.dev || stats.ino !== sameAs.ino) {
      throw new RecordFileError(
        'it was replaced by another file after the inbox took it: nothing of it read; drop the export again',
      );
    }
    return { bytes: handle.createReadStream(), size: stats.size };
  } catch (error) {
    await handle.close();
    throw error;
  }
}
