import { describe, expect, it } from 'vitest';
import { professionalListItemSchema } from '../../src/partner-api/professionalsSchema.js';
import { reviewSchema } from '../../src/partner-api/reviewsSchema.js';
import { uuidText } from '../../src/partner-api/uuidText.js';
import { reviewCreatedEventSchema } from '../../src/webhooks/event.js';

const review = {
  id: '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f',
  review_number: 'R-0A1B2C3D',
  created_at: '2026-11-01T10:00:00Z',
  rating: 5,
  comment: null,
  is_verified: true,
  reviewer: { name: null, email: null },
  professional: null,
};

describe('ids the spec types as UUID', () => {
  it('accepts any 8-4-4-4-12 hex id, version and variant digits included, as PostgreSQL does', () => {
    for (const id of [
      '6f1c2a5e-8a7b-0c1d-0e2f-0a1b2c3d4e5f', // version 0, variant 0
      '6f1c2a5e-8a7b-fc1d-ce2f-0a1b2c3d4e5f', // version f, variant c
      '00000000-0000-0000-0000-000000000000',
    ]) {
      expect(uuidText.parse(id)).toBe(id);
    }
  });

  it('returns it in lower case, so one id in two cases is one id', () => {
    expect(uuidText.parse('6F1C2A5E-8A7B-4C1D-9E2F-0A1B2C3D4E5F')).toBe(
      '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f',
    );
  });

  it('refuses anything else, with a reason', () => {
    for (const id of [
      '',
      'nope',
      '6f1c2a5e8a7b4c1d9e2f0a1b2c3d4e5f',
      '{6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f}',
      ' 6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f',
      '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5g',
      '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f0',
    ]) {
      const parsed = uuidText.safeParse(id);
      expect(parsed.success, id).toBe(false);
      expect(parsed.error?.issues[0]?.message).toBe('must be a UUID (8-4-4-4-12 hex digits)');
    }
  });

  it('is how the review feed, the webhook delivery and the professionals listing read their ids', () => {
    const odd = '6F1C2A5E-8A7B-0C1D-0E2F-0A1B2C3D4E5F';
    const lower = odd.toLowerCase();
    const parsedReview = reviewSchema.parse({ ...review, id: odd, professional: { id: odd, name: null } });
    expect(parsedReview.id).toBe(lower);
    expect(parsedReview.professional?.id).toBe(lower);
    const event = reviewCreatedEventSchema.parse({
      event: 'review.created',
      timestamp: '1',
      data: { ...review, id: odd },
    });
    expect(event.data.id).toBe(lower);
    const professional = professionalListItemSchema.parse({
      id: odd,
      slug: 'dr-q',
      first_name: 'Q',
      last_name: 'R',
      active: true,
      profile_url: 'https://example.test/p/dr-q',
      default_survey_url: null,
      created_at: '2026-01-01T10:00:00Z',
    });
    expect(professional.id).toBe(lower);
  });
});
