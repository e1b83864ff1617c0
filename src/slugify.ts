/**
 * Lower-case ASCII words joined by hyphens; accents are folded, everything else dropped; at most
 * 60 characters. The platform's rule for generated slugs, which review-mirror derives the same way.
 */
export function slugify(text: string, fallback: string): string {
  const slug = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
  return slug === '' ? fallback : slug;
}
