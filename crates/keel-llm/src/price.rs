//! What tokens cost: a dated table of the providers' published prices, and the cost of a
//! response at the time it was made.
//!
//! Invariants:
//! - Prices are data, each with its source page and the date it was read; a model is priced
//!   only where the table has it *at that provider's own host* (the same model id bought
//!   through a reseller is not priced) or the user's `[providers.X.price]` says. Anything else
//!   has no price: keel shows tokens, never a guessed amount.
//! - Matched on the real model id (exact), never a display name.
//! - DeepSeek bills peak and off-peak hours differently: a response is priced at the rate of
//!   the hour (UTC) it completed in. DeepSeek bills China's statutory holidays off-peak all day;
//!   keel has no holiday calendar (none of the official notices is in reach), so a weekday
//!   holiday's peak hours are priced at the peak rate: an amount above the bill, never below.
//! - Where a provider does not split input into cache hits and misses, all input is priced as
//!   misses (the higher rate: an amount never below the bill).
//! - A provider with regional price lists (MiMo: Domestic in CNY, Overseas) is priced only for
//!   the region the user declares (`[providers.X] region`), from that region's list, in its
//!   currency; without a region, or for a region whose list keel has not read, nothing is
//!   priced. Context tiers price a response by its request's input tokens, the boundary read
//!   so that an ambiguous count is billed at the higher tier.

use keel_types::Usage;

/// Prices per million tokens, in one currency.
#[derive(Clone, Debug, PartialEq)]
pub struct Rates {
    pub input_cache_hit: f64,
    pub input_cache_miss: f64,
    /// What a token written to the cache costs, where the provider bills writes at their own
    /// rate (`None`: as a miss).
    pub input_cache_write: Option<f64>,
    pub output: f64,
}

/// Hours (UTC, `[start, end)`) billed at the peak rates, on the given weekdays.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakHours {
    pub hours: &'static [(u8, u8)],
    /// Monday through Friday only (weekends off-peak), or every day.
    pub weekdays_only: bool,
    pub rates: Rates,
}

/// Which of a provider's regional price lists applies (`[providers.X] region`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    Domestic,
    Overseas,
}

impl Region {
    pub fn parse(text: &str) -> Option<Region> {
        match text {
            "domestic" => Some(Region::Domestic),
            "overseas" => Some(Region::Overseas),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Region::Domestic => "domestic",
            Region::Overseas => "overseas",
        }
    }
}

/// The rates for a request whose input is longer than `above_input_tokens`.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextTier {
    pub above_input_tokens: u64,
    pub rates: Rates,
}

/// A model's price.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// The rates outside peak hours (or always, without them).
    pub rates: Rates,
    pub peak: Option<PeakHours>,
    /// Longer requests' rates, by the request's input tokens (ascending; none: one rate).
    pub tiers: Vec<ContextTier>,
    pub currency: String,
    /// Where the figures come from, and when they were read (`user config` for an override).
    pub source: String,
    pub checked: String,
}

const DEEPSEEK_SOURCE: &str = "https://api-docs.deepseek.com/quick_start/pricing";
const DEEPSEEK_CHECKED: &str = "2026-11-15";
/// 01:00–04:00 and 06:00–10:00 UTC (09:00–12:00 and 14:00–18:00 Beijing time), Monday to
/// Friday: DeepSeek's peak hours since its V4.1 release notes.
const DEEPSEEK_PEAK: &[(u8, u8)] = &[(1, 4), (6, 10)];

struct Known {
    host: &'static str,
    models: &'static [&'static str],
    off_peak: (f64, f64, f64),
    peak: (f64, f64, f64),
}

/// USD per million tokens: (cache hit, cache miss, output).
const KNOWN: &[Known] = &[
    Known {
        host: "api.deepseek.com",
        // The legacy Flash names are still accepted and billed as Flash.
        models: &[
            "deepseek-flash",
            "deepseek-v4-flash",
            "deepseek-v4-flash-vision-exp",
        ],
        off_peak: (0.003, 0.15, 0.60),
        peak: (0.006, 0.30, 1.20),
    },
    Known {
        host: "api.deepseek.com",
        models: &["deepseek-v4-pro"],
        off_peak: (0.022, 0.66, 1.98),
        peak: (0.044, 1.32, 3.96),
    },
];

const MIMO_SOURCE: &str = "https://platform.xiaomimimo.com/docs/en-US/pricing";
/// The day keel's copy of the page was read (the page itself shows no date).
const MIMO_CHECKED: &str = "2026-12-07";
const MIMO_HOST: &str = "api.xiaomimimo.com";
/// The page's "Input ≤ 256K" boundary, read as 256,000 tokens: a request between 256,000 and
/// 262,144 input tokens is priced at the higher tier (an amount never below the bill).
const MIMO_TIER: u64 = 256_000;

/// Model ids, rates up to the tier, rates above it.
type MimoRow = (
    &'static [&'static str],
    (f64, f64, f64),
    Option<(f64, f64, f64)>,
);

/// MiMo's models on its pay-as-you-go host, with the Domestic list's rates (CNY per million
/// tokens: cache hit, cache miss, output) up to `MIMO_TIER` input tokens and above it (`None`:
/// the model's window is 256K, the tier does not apply). The page's Overseas list was not
/// read: overseas, nothing is priced. The TTS models ("limited-time free") are not priced.
const MIMO_DOMESTIC: &[MimoRow] = &[
    (
        &["mimo-v2.5-pro", "mimo-v2-pro"],
        (1.40, 7.00, 21.00),
        Some((2.80, 14.00, 42.00)),
    ),
    (
        &["mimo-v2.5"],
        (0.56, 2.80, 14.00),
        Some((1.12, 5.60, 28.00)),
    ),
    (&["mimo-v2-omni"], (0.56, 2.80, 14.00), None),
    (&["mimo-v2-flash"], (0.07, 0.70, 2.10), None),
];

/// MiMo's price of `model` for `region`, if its list has it.
fn mimo_price(model: &str, region: Option<Region>) -> Option<Price> {
    if region != Some(Region::Domestic) {
        return None;
    }
    let (_, base, above) = MIMO_DOMESTIC
        .iter()
        .find(|(models, _, _)| models.contains(&model))?;
    Some(Price {
        rates: rates(*base),
        peak: None,
        tiers: above
            .map(|above| ContextTier {
                above_input_tokens: MIMO_TIER,
                rates: rates(above),
            })
            .into_iter()
            .collect(),
        currency: "CNY".into(),
        source: MIMO_SOURCE.into(),
        checked: MIMO_CHECKED.into(),
    })
}

fn rates((input_cache_hit, input_cache_miss, output): (f64, f64, f64)) -> Rates {
    Rates {
        input_cache_hit,
        input_cache_miss,
        input_cache_write: None,
        output,
    }
}

/// The host of `base_url` (`https://api.deepseek.com/anthropic` → `api.deepseek.com`).
fn host_of(base_url: &str) -> Option<String> {
    url::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
}

/// The models the price table knows at `base_url`'s host (for completing `/model`).
pub fn known_models(base_url: &str) -> Vec<&'static str> {
    let Some(host) = host_of(base_url) else {
        return Vec::new();
    };
    let mimo = MIMO_DOMESTIC
        .iter()
        .filter(|_| host == MIMO_HOST)
        .flat_map(|(models, _, _)| models.iter().copied());
    KNOWN
        .iter()
        .filter(|known| known.host == host)
        .flat_map(|known| known.models.iter().copied())
        .chain(mimo)
        .collect()
}

/// The published price of `model` bought from `base_url` in `region` (where the provider has
/// regional lists), if the table has it.
pub fn known_price(base_url: &str, model: &str, region: Option<Region>) -> Option<Price> {
    let host = host_of(base_url)?;
    if host == MIMO_HOST {
        return mimo_price(model, region);
    }
    let known = KNOWN
        .iter()
        .find(|known| known.host == host && known.models.contains(&model))?;
    Some(Price {
        rates: rates(known.off_peak),
        peak: Some(PeakHours {
            hours: DEEPSEEK_PEAK,
            weekdays_only: true,
            rates: rates(known.peak),
        }),
        tiers: Vec::new(),
        currency: "USD".into(),
        source: DEEPSEEK_SOURCE.into(),
        checked: DEEPSEEK_CHECKED.into(),
    })
}

/// The price keel uses for `model` on `profile`: the user's, else the table's, else none.
pub fn price_for(profile: &crate::ProviderProfile, model: &str) -> Option<Price> {
    profile
        .price
        .clone()
        .or_else(|| known_price(&profile.base_url, model, profile.region))
}

/// Seconds since the Unix epoch → (weekday with Monday = 0, hour), in UTC.
fn weekday_and_hour(unix_seconds: u64) -> (u64, u8) {
    let days = unix_seconds / 86_400;
    // 1970-01-01 was a Thursday (3 with Monday = 0).
    let weekday = (days + 3) % 7;
    let hour = u8::try_from((unix_seconds % 86_400) / 3_600).unwrap_or(0);
    (weekday, hour)
}

impl Price {
    /// A flat price (a user's override): the same rates at every hour.
    pub fn flat(rates: Rates, currency: String) -> Price {
        Price {
            rates,
            peak: None,
            tiers: Vec::new(),
            currency,
            source: "user config".into(),
            checked: String::new(),
        }
    }

    /// The rates in force at `unix_seconds`.
    pub fn rates_at(&self, unix_seconds: u64) -> &Rates {
        let Some(peak) = &self.peak else {
            return &self.rates;
        };
        let (weekday, hour) = weekday_and_hour(unix_seconds);
        let on_a_peak_day = !peak.weekdays_only || weekday < 5;
        let in_peak_hours = peak
            .hours
            .iter()
            .any(|(start, end)| hour >= *start && hour < *end);
        if on_a_peak_day && in_peak_hours {
            &peak.rates
        } else {
            &self.rates
        }
    }

    /// What `usage` costs if billed now, in this price's currency.
    pub fn charge_now(&self, usage: &Usage) -> keel_types::Cost {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        keel_types::Cost {
            amount: self.cost(usage, now),
            currency: self.currency.clone(),
        }
    }

    /// The rates for a request of `input_tokens` at `unix_seconds`: its context tier's, else
    /// the hour's.
    pub fn rates_for(&self, unix_seconds: u64, input_tokens: u64) -> &Rates {
        self.tiers
            .iter()
            .rev()
            .find(|tier| input_tokens > tier.above_input_tokens)
            .map_or_else(|| self.rates_at(unix_seconds), |tier| &tier.rates)
    }

    /// What `usage` (one response's) cost, billed at `unix_seconds`.
    pub fn cost(&self, usage: &Usage, unix_seconds: u64) -> f64 {
        let rates = self.rates_for(unix_seconds, usage.input);
        let (hits, misses) = if usage.cache_hit + usage.cache_miss > 0 {
            (usage.cache_hit, usage.cache_miss)
        } else {
            (0, usage.input)
        };
        // Writes are part of the misses; billed at their own rate where there is one.
        let writes = usage.cache_write.min(misses);
        let per_token = |count: u64, per_million: f64| count as f64 * per_million / 1_000_000.0;
        per_token(hits, rates.input_cache_hit)
            + per_token(misses - writes, rates.input_cache_miss)
            + per_token(
                writes,
                rates.input_cache_write.unwrap_or(rates.input_cache_miss),
            )
            + per_token(usage.output, rates.output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-02 was a Wednesday.
    const WEDNESDAY_MIDNIGHT: u64 = 1_796_169_600;

    fn usage() -> Usage {
        Usage {
            input: 1_000_000,
            output: 1_000_000,
            reasoning: 0,
            cache_hit: 800_000,
            cache_miss: 200_000,
            cache_write: 0,
        }
    }

    #[test]
    fn the_table_is_matched_on_the_providers_own_host_and_the_exact_id() {
        let known = |base: &str, model: &str| known_price(base, model, None);
        assert!(known("https://api.deepseek.com", "deepseek-flash").is_some());
        assert!(known("https://api.deepseek.com/anthropic", "deepseek-v4-pro").is_some());
        assert_eq!(
            known("https://openrouter.ai/api/v1", "deepseek-flash"),
            None
        );
        assert_eq!(known("http://127.0.0.1:9", "deepseek-flash"), None);
        assert_eq!(known("https://api.deepseek.com", "deepseek-flash-x"), None);
        assert_eq!(known("https://api.deepseek.com", "DeepSeek Flash"), None);
    }

    #[test]
    fn peak_hours_double_the_price_on_weekdays_only() {
        let flash = known_price("https://api.deepseek.com", "deepseek-flash", None).unwrap();
        let at = |day: u64, hour: u64| WEDNESDAY_MIDNIGHT + day * 86_400 + hour * 3_600;
        // 0.8 M hits, 0.2 M misses, 1 M out.
        let off_peak = 0.8 * 0.003 + 0.2 * 0.15 + 0.60;
        let peak = 0.8 * 0.006 + 0.2 * 0.30 + 1.20;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(flash.cost(&usage(), at(0, 0)), off_peak));
        assert!(
            close(flash.cost(&usage(), at(0, 1)), peak),
            "01:00 Wednesday"
        );
        assert!(close(flash.cost(&usage(), at(0, 3)), peak));
        assert!(
            close(flash.cost(&usage(), at(0, 4)), off_peak),
            "04:00 is off-peak"
        );
        assert!(close(flash.cost(&usage(), at(0, 9)), peak));
        assert!(close(flash.cost(&usage(), at(0, 10)), off_peak));
        assert!(close(flash.cost(&usage(), at(3, 2)), off_peak), "Saturday");
        assert!(close(flash.cost(&usage(), at(4, 7)), off_peak), "Sunday");
        assert!(close(flash.cost(&usage(), at(5, 7)), peak), "Monday");
    }

    #[test]
    fn unsplit_input_is_priced_as_misses_and_a_flat_price_ignores_the_hour() {
        let flat = Price::flat(
            Rates {
                input_cache_hit: 1.0,
                input_cache_miss: 2.0,
                input_cache_write: None,
                output: 4.0,
            },
            "EUR".into(),
        );
        let unsplit = Usage {
            cache_hit: 0,
            cache_miss: 0,
            ..usage()
        };
        assert!((flat.cost(&unsplit, 0) - 6.0).abs() < 1e-9);
        assert!((flat.cost(&usage(), WEDNESDAY_MIDNIGHT + 7_200) - (0.8 + 0.4 + 4.0)).abs() < 1e-9);
    }

    #[test]
    fn cache_writes_are_billed_at_their_own_rate_where_there_is_one() {
        let rates = |write: Option<f64>| Rates {
            input_cache_hit: 1.0,
            input_cache_miss: 2.0,
            input_cache_write: write,
            output: 4.0,
        };
        // 800k hits, 200k misses of which 150k were written to the cache, 1M out.
        let written = Usage {
            cache_write: 150_000,
            ..usage()
        };
        let with_rate = Price::flat(rates(Some(2.5)), "USD".into());
        assert!((with_rate.cost(&written, 0) - (0.8 + 0.05 * 2.0 + 0.15 * 2.5 + 4.0)).abs() < 1e-9);
        // No write rate: a write is a miss.
        let without = Price::flat(rates(None), "USD".into());
        assert!((without.cost(&written, 0) - (0.8 + 0.4 + 4.0)).abs() < 1e-9);
        // More writes than misses reported: never a negative count.
        let odd = Usage {
            cache_write: 900_000,
            ..usage()
        };
        assert!((with_rate.cost(&odd, 0) - (0.8 + 0.2 * 2.5 + 4.0)).abs() < 1e-9);
    }

    #[test]
    fn mimo_is_priced_only_for_the_declared_region_its_list_was_read_for() {
        const MIMO: &str = "https://api.xiaomimimo.com/v1";
        assert_eq!(known_price(MIMO, "mimo-v2.5-pro", None), None);
        assert_eq!(
            known_price(MIMO, "mimo-v2.5-pro", Some(Region::Overseas)),
            None
        );
        let pro = known_price(MIMO, "mimo-v2.5-pro", Some(Region::Domestic)).unwrap();
        assert_eq!(pro.currency, "CNY");
        assert_eq!(pro.source, MIMO_SOURCE);
        assert_eq!(
            pro,
            known_price(MIMO, "mimo-v2-pro", Some(Region::Domestic)).unwrap()
        );
        // The Token Plan's hosts are a subscription: not priced per token.
        assert_eq!(
            known_price(
                "https://token-plan-cn.xiaomimimo.com/v1",
                "mimo-v2.5-pro",
                Some(Region::Domestic)
            ),
            None
        );
        // The TTS models are "limited-time free": left unpriced, as is an unknown id.
        assert_eq!(
            known_price(MIMO, "mimo-v2.5-tts", Some(Region::Domestic)),
            None
        );
        assert_eq!(known_price(MIMO, "mimo-v9", Some(Region::Domestic)), None);
        assert!(known_models(MIMO).contains(&"mimo-v2-flash"));
    }

    #[test]
    fn a_long_request_is_priced_at_its_context_tier() {
        let pro = known_price(
            "https://api.xiaomimimo.com/v1",
            "mimo-v2.5-pro",
            Some(Region::Domestic),
        )
        .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // 200k input (150k hits, 50k misses), 10k out: the first tier.
        let short = Usage {
            input: 200_000,
            output: 10_000,
            reasoning: 0,
            cache_hit: 150_000,
            cache_miss: 50_000,
            cache_write: 0,
        };
        assert!(close(
            pro.cost(&short, WEDNESDAY_MIDNIGHT),
            0.15 * 1.40 + 0.05 * 7.00 + 0.01 * 21.00
        ));
        // 300k input: the 256K–1M tier, for all of its tokens.
        let long = Usage {
            input: 300_000,
            cache_hit: 250_000,
            cache_miss: 50_000,
            ..short
        };
        assert!(close(
            pro.cost(&long, WEDNESDAY_MIDNIGHT),
            0.25 * 2.80 + 0.05 * 14.00 + 0.01 * 42.00
        ));
        // The boundary itself is the first tier; a token more is the second.
        let at = |input| Usage {
            input,
            cache_hit: 0,
            cache_miss: input,
            output: 0,
            ..short
        };
        assert!(close(pro.cost(&at(256_000), 0), 0.256 * 7.00));
        assert!(close(pro.cost(&at(256_001), 0), 0.256_001 * 14.00));
        // A model whose window is 256K has one rate.
        let flash = known_price(
            "https://api.xiaomimimo.com/v1",
            "mimo-v2-flash",
            Some(Region::Domestic),
        )
        .unwrap();
        assert!(flash.tiers.is_empty());
    }
}
