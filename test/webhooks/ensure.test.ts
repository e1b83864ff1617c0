import { describe, expect, it } from 'vitest';
import { planEnsure } from '../../src/webhooks/ensure.js';
import { countStates, webhookState } from '../../src/webhooks/health.js';

const URL_A = 'https://mirror.example.com/webhooks/review-created';
const hook = (id: string, url: string, created_at: string) => ({ id, url, created_at });

describe('planEnsure', () => {
  it('registers when no webhook has the URL', () => {
    expect(planEnsure([hook('w1', 'https://other/x', '2026-01-01')], URL_A, new Set(), false)).toEqual({
      keep: undefined,
      register: true,
      remove: [],
    });
  });

  it('keeps the newest webhook whose secret is stored and removes the other ones with the URL', () => {
    const listed = [
      hook('w1', URL_A, '2026-01-01T00:00:00Z'),
      hook('w2', URL_A, '2026-01-02T00:00:00Z'),
      hook('w3', URL_A, '2026-01-03T00:00:00Z'),
      hook('w4', 'https://other/x', '2026-01-01T00:00:00Z'),
    ];
    expect(planEnsure(listed, URL_A, new Set(['w1', 'w2']), false)).toEqual({
      keep: 'w2',
      register: false,
      remove: ['w1', 'w3'],
    });
  });

  it('keeps the oldest unknown one when secrets are configured, else replaces them all', () => {
    const listed = [hook('w2', URL_A, '2026-01-02T00:00:00Z'), hook('w1', URL_A, '2026-01-01T00:00:00Z')];
    expect(planEnsure(listed, URL_A, new Set(), true)).toEqual({
      keep: 'w1',
      register: false,
      remove: ['w2'],
    });
    expect(planEnsure(listed, URL_A, new Set(), false)).toEqual({
      keep: undefined,
      register: true,
      remove: ['w1', 'w2'],
    });
  });

  it('neither keeps nor removes a webhook whose id cannot be named, and registers nothing beside it', () => {
    const listed = [hook('w1', URL_A, '2026-01-01T00:00:00Z'), hook('w2', URL_A, '2026-01-02T00:00:00Z')];
    const inexactAtUrl = [{ url: 'https://other/x' }, { url: URL_A.replace('mirror', 'MIRROR') }];
    // Ours is kept and duplicates removed as usual.
    expect(planEnsure(listed, URL_A, new Set(['w2']), false, inexactAtUrl)).toEqual({
      keep: 'w2',
      register: false,
      remove: ['w1'],
    });
    // None is ours: the one that cannot be named may be, so nothing is registered or removed.
    expect(planEnsure(listed, URL_A, new Set(), false, inexactAtUrl)).toEqual({
      keep: undefined,
      register: false,
      remove: [],
    });
    // At another URL, or showing none, it holds nothing back.
    expect(planEnsure([], URL_A, new Set(), false, [{ url: 'https://other/x' }, { url: undefined }])).toEqual(
      {
        keep: undefined,
        register: true,
        remove: [],
      },
    );
  });
});

describe('webhookState', () => {
  it('says inactive, failing (last_error recorded) or active', () => {
    expect(webhookState({ is_active: false, last_error: 'HTTP 500' })).toBe('inactive');
    expect(webhookState({ is_active: true, last_error: 'HTTP 500' })).toBe('failing');
    expect(webhookState({ is_active: true, last_error: null })).toBe('active');
    expect(webhookState({ last_error: null })).toBe('active');
    expect(countStates([{ is_active: true, last_error: null }, { is_active: false }])).toEqual({
      active: 1,
      inactive: 1,
      failing: 0,
    });
  });
});
