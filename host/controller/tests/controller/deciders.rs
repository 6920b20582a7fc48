//! What the decision records' policy names stand for, on the live controller over HTTP:
//! each page of `GET /v1/decisions` names the component (version, digest) behind every
//! policy name of its rounds once, from the round it began deciding, and a name uploaded
//! again with other bytes is told apart from round to round.

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{STREAM, start_live};

/// The digest `/v1/policies` lists for `name`.
async fn listed_digest(live: &support::Live, name: &str) -> String {
    let (_, list) = live.get("/v1/policies").await;
    list["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} is listed: {list}"))["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The page's entries for `name`: (from_round, digest).
fn entries(page: &Value, name: &str) -> Vec<(u64, String)> {
    page["policies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == name)
        .map(|p| {
            (
                p["from_round"].as_u64().unwrap(),
                p["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_page_of_decisions_names_the_bytes_behind_each_policy_name_once_even_when_a_name_is_uploaded_again()
 {
    let live = start_live(STREAM, 20.0, Duration::from_millis(500)).await;
    live.wait_for_rounds_after(2).await;
    // One guest, two builds: the same name, other bytes.
    let (status, first) = live
        .upload(support::guest_reading_loss("least-loaded", true))
        .await;
    assert_eq!(status, 201, "{first}");
    let name = first["policy"]["name"].as_str().unwrap().to_string();
    let first_digest = listed_digest(&live, &name).await;
    let (status, applied) = live
        .post(&format!("/v1/policies/{name}/activate"), json!({}))
        .await;
    assert_eq!(status, 200, "{applied}");
    let first_from = applied["from_round"].as_u64().unwrap();
    live.wait_for_rounds_after(first_from + 3).await;
    let (status, second) = live
        .upload(support::guest_reading_loss("least-loaded", false))
        .await;
    assert_eq!(status, 201, "{second}");
    let second_digest = listed_digest(&live, &name).await;
    assert_ne!(first_digest, second_digest);
    let after_second = live.rounds().await;
    live.wait_for_rounds_after(after_second + 3).await;

    let (_, page) = live.get("/v1/decisions?since=-1&limit=1000").await;
    let default_digest = listed_digest(&live, "default").await;
    assert_eq!(entries(&page, "default"), [(0, default_digest)], "{page}");
    let named = entries(&page, &name);
    let [(from_a, digest_a), (from_b, digest_b)] = &named[..] else {
        panic!("two builds of {name}: {page}");
    };
    assert_eq!(
        (digest_a, digest_b),
        (&first_digest, &second_digest),
        "{page}"
    );
    assert_eq!(
        *from_a, first_from,
        "the first build decided from its activation"
    );
    assert!(
        *from_b > *from_a && *from_b <= after_second,
        "the second build decided from the round after its upload: {page}"
    );
    // Every round is told apart by the entries: each decided by the build in effect.
    for record in page["decisions"].as_array().unwrap() {
        let round = record["round"].as_u64().unwrap();
        let expected = if round < first_from {
            "default"
        } else {
            name.as_str()
        };
        assert_eq!(record["policy"], expected, "round {round}");
    }
    assert!(
        page["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| !r.to_string().contains("sha256:")),
        "no record repeats a digest"
    );

    // A page of the last rounds names only what its rounds need.
    let (_, last) = live.get("/v1/decisions?limit=2").await;
    assert_eq!(
        entries(&last, &name),
        [(*from_b, second_digest.clone())],
        "{last}"
    );
    assert!(entries(&last, "default").is_empty(), "{last}");
    live.stop().await;
}
