import { z } from 'zod';
import { unstorableReason } from '../db/storableText.js';

/**
 * Text the mirror indexes (a review's number, a slug) and users look records up by. A B-tree entry
 * holds at most 2,704 bytes, so a longer value would fail its whole write group on every run:
 * 500 characters are at most 1,500 bytes of UTF-8, and no such identifier needs more.
 */
export const indexedText = z.string().min(1).max(500, 'must be at most 500 characters');

/**
 * A slug names its record in the platform's URLs (`/professionals/:slug`): the mirror reads a
 * record by the slug it stored, provisioning by the file's. Half a character (a lone UTF-16
 * surrogate, an emoji cut by a truncation) is named by no URL: encodeURIComponent throws on it,
 * failing the whole sync or provisioning run, on every run. Text would store it, and U+0000, as
 * U+FFFD: a slug naming no record. So, unlike other indexed text (a review's number, stored with
 * U+FFFD), a slug must be one PostgreSQL stores as sent, judged by storableText.ts's
 * unstorableReason, and one that is not is refused with that reason. A zod check, added to every
 * schema of a slug: the platform's (slugText) and the provisioning file's.
 */
export const slugCheck = z.superRefine<string>((value, ctx) => {
  const reason = unstorableReason(value);
  if (reason === undefined) return;
  ctx.addIssue({
    code: 'custom',
    message: `${reason}: a slug names its record in URLs, and must be kept as sent`,
  });
});

/**
 * A record's slug as the platform sends it: indexed text that a URL can name and PostgreSQL can
 * store as sent. A record failing it is quarantined, not stored under a slug naming nothing.
 */
export const slugText = indexedText.check(slugCheck);
