import { z } from 'zod';

/**
 * Text the mirror indexes (a review's number, a slug) and users look records up by. A B-tree entry
 * holds at most 2,704 bytes, so a longer value would fail its whole write group on every run:
 * 500 characters are at most 1,500 bytes of UTF-8, and no such identifier needs more.
 */
export const indexedText = z.string().min(1).max(500, 'must be at most 500 characters');
