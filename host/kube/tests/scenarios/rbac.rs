//! `deploy/rbac.yaml` grants exactly what the scenarios saw the controller use: nothing
//! missing, nothing unused.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::mock::Access;
use crate::{
    adopted_lifecycle, adopted_scaling, adoption, cluster, events, failures, fencing, gangs, lease,
    logs, moves, others, outcomes, ownership, releases, rendezvous, restarts, snapshot, spread,
    startup, state, volumes, wedges, writes,
};

/// One rule of a (Cluster)Role, flattened.
fn granted(path: &str) -> BTreeSet<Access> {
    let text = std::fs::read_to_string(path).expect("deploy/rbac.yaml");
    let mut out = BTreeSet::new();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc).expect("YAML");
        if !matches!(value["kind"].as_str(), Some("ClusterRole" | "Role")) {
            continue;
        }
        for rule in value["rules"].as_array().expect("rules") {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        assert!(
                            group != "*" && !resource.contains('*') && verb != "*",
                            "wildcard in {path}: {rule}"
                        );
                        let (resource, sub) = resource
                            .split_once('/')
                            .map(|(r, s)| (r.to_string(), s.to_string()))
                            .unwrap_or((resource.clone(), String::new()));
                        out.insert(Access {
                            verb: verb.clone(),
                            group: group.clone(),
                            resource,
                            subresource: sub,
                        });
                    }
                }
            }
        }
    }
    out
}

// Wall time: some scenarios run the cluster on a blocking thread (see
// `cluster`), which a paused clock would race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rbac_in_deploy_allows_exactly_what_the_controller_uses() {
    let mut used: BTreeSet<Access> = BTreeSet::new();
    used.extend(releases::releasing_a_gang().await);
    used.extend(releases::rolling_back_a_failed_gang_release().await);
    used.extend(releases::rolling_back_leaves_the_pods_that_were_there_before().await);
    used.extend(releases::a_release_that_races_another_write_pins_the_pod_as_it_is_now().await);
    used.extend(releases::a_pod_released_elsewhere_by_someone_else_fails_the_placement().await);
    used.extend(failures::a_pod_the_kubelet_refused_sends_its_gang_back_to_the_queue().await);
    used.extend(failures::failing_past_the_backoff_limit_fails_the_job_and_frees_its_gang().await);
    used.extend(failures::a_failure_within_the_limit_queues_the_gang_after_a_back_off().await);
    used.extend(releases::a_template_the_api_server_refuses_becomes_a_condition().await);
    used.extend(releases::placing_again_after_a_restart_reuses_a_held_pod().await);
    used.extend(moves::migrating_with_a_checkpoint_annotation().await);
    used.extend(moves::migrating_with_the_stop_signal().await);
    used.extend(moves::migrating_to_the_current_node_only_marks().await);
    used.extend(moves::resizing_a_pods_cpu().await);
    used.extend(moves::a_refused_resize_becomes_a_condition_twice().await);
    used.extend(moves::scaling_restarts_the_job_with_more_workers().await);
    used.extend(writes::a_status_update_recovers_from_a_409_conflict().await);
    used.extend(writes::policy_labels_are_one_merge_patch().await);
    used.extend(snapshot::a_dropped_node_watch_restarts_where_it_left_off().await);
    used.extend(snapshot::the_snapshot_comes_from_the_caches().await);
    used.extend(snapshot::usage_comes_from_metrics_when_served().await);
    used.extend(snapshot::loss_samples_come_from_the_followed_log().await);
    used.extend(lease::every_lease_access().await);
    used.extend(lease::the_leader_label_follows_the_grant().await);
    used.extend(state::state_survives_in_a_configmap().await);
    used.extend(state::components_survive_in_configmaps().await);
    used.extend(events::a_refusal_becomes_an_event_on_the_pod().await);
    used.extend(cluster::the_control_loop_places_a_waiting_job_through_the_cluster().await);
    used.extend(
        cluster::a_migration_waiting_out_its_grace_period_does_not_hold_up_another_jobs_placement()
            .await,
    );
    used.extend(
        cluster::a_pushed_loss_sample_joins_the_series_read_back_from_the_status_and_is_written_to_it()
            .await,
    );
    used.extend(startup::a_leader_with_an_unlisted_pod_cache_waits_for_it().await);
    used.extend(wedges::a_gate_a_webhook_added_stays_for_its_owner_to_lift().await);
    used.extend(
        wedges::a_task_on_a_partitioned_node_is_not_replaced_until_the_node_is_out_of_service()
            .await,
    );
    used.extend(wedges::a_resize_the_node_cannot_fit_is_reported_infeasible().await);
    used.extend(rendezvous::pods_are_named_under_the_jobs_headless_service().await);
    used.extend(others::other_pods_are_charged_while_they_hold_resources().await);
    used.extend(fencing::a_hung_call_is_abandoned_and_the_round_goes_on().await);
    used.extend(ownership::a_job_created_again_under_the_same_name_adopts_nothing().await);
    used.extend(ownership::another_installation_s_job_is_neither_seen_nor_touched().await);
    used.extend(
        gangs::a_placement_needing_an_unknown_extended_resource_comes_back_and_backs_off().await,
    );
    used.extend(gangs::a_placement_against_a_node_selector_admission_added_comes_back().await);
    used.extend(gangs::a_drained_member_restarts_the_gang().await);
    used.extend(gangs::a_member_gone_from_the_cluster_restarts_the_gang().await);
    used.extend(gangs::a_crash_loop_consumes_the_failure_budget().await);
    used.extend(gangs::a_lost_status_write_is_written_again_from_the_pods().await);
    used.extend(gangs::a_refusal_is_cleared_once_the_gang_is_bound_whole().await);
    used.extend(restarts::moving_one_member_of_a_gang_restarts_every_member().await);
    used.extend(restarts::moving_one_member_of_an_elastic_job_restarts_that_member_alone().await);
    used.extend(
        restarts::a_restart_is_refused_while_the_cache_lacks_a_pod_the_status_names().await,
    );
    used.extend(wedges::a_task_confirmed_stopped_on_a_partitioned_node_is_replaced().await);
    used.extend(logs::a_new_leader_reads_a_log_from_the_samples_already_recorded().await);
    used.extend(
        logs::a_log_is_asked_for_by_container_and_a_refusal_is_not_repeated_at_once().await,
    );
    used.extend(fencing::a_replica_that_stopped_leading_sends_nothing_mid_restart().await);
    used.extend(
        restarts::a_successor_asks_for_the_checkpoint_its_predecessor_recorded_but_never_asked()
            .await,
    );
    used.extend(restarts::a_migration_decided_on_a_stale_cache_starts_no_second_restart().await);
    used.extend(restarts::a_rescale_decided_on_a_stale_cache_starts_no_second_restart().await);
    used.extend(restarts::restart_pods_that_exited_on_their_own_are_deleted().await);
    used.extend(restarts::old_pods_that_succeeded_do_not_make_a_rescaled_job_succeed().await);
    used.extend(restarts::a_job_whose_workers_succeeded_succeeds_and_its_ps_is_stopped().await);
    used.extend(outcomes::a_release_an_admission_webhook_denies_is_a_failed_action().await);
    used.extend(outcomes::a_resize_the_api_server_forbids_is_a_failed_action().await);
    used.extend(outcomes::a_preemption_checkpoints_stops_and_requeues_the_job().await);
    used.extend(volumes::a_claim_bound_to_a_zonal_volume_keeps_the_job_in_its_zone().await);
    used.extend(volumes::a_claim_waiting_for_its_first_consumer_is_left_to_the_scheduler().await);
    used.extend(volumes::a_missing_claim_holds_the_job_with_a_condition_naming_it().await);
    used.extend(volumes::claims_volumes_and_classes_are_watched_and_trimmed().await);
    used.extend(volumes::a_claim_that_turns_up_lifts_the_hold_and_the_condition_says_so().await);
    used.extend(
        volumes::a_pod_with_an_ephemeral_volume_is_made_and_released_like_any_other().await,
    );
    used.extend(
        volumes::a_claim_of_a_class_without_provisioner_is_offered_the_nodes_of_its_matching_volumes()
            .await,
    );
    used.extend(
        spread::a_host_port_the_scheduler_finds_taken_sends_the_gang_back_to_the_policy().await,
    );
    let granted = granted(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/rbac.yaml"
    ));
    let missing: Vec<_> = used.difference(&granted).collect();
    let unused: Vec<_> = granted.difference(&used).collect();
    assert!(
        missing.is_empty(),
        "the controller uses what deploy/rbac.yaml does not grant: {missing:#?}"
    );
    assert!(
        unused.is_empty(),
        "deploy/rbac.yaml grants what no test saw the controller use: {unused:#?}"
    );
}

// Wall time, as above: the adoption scenarios run the cluster on a blocking thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_integration_grants_what_adoption_uses_beyond_the_base_role_and_never_an_owner_write()
{
    let mut used: BTreeSet<Access> = BTreeSet::new();
    used.extend(adoption::a_pytorchjob_of_a_master_and_four_workers().await);
    used.extend(adoption::an_indexed_job_of_eight().await);
    used.extend(adoption::a_jobset_of_two_replicated_jobs().await);
    used.extend(adoption::a_kind_not_enabled_gets_one_event().await);
    used.extend(adopted_lifecycle::pods_that_never_waited_behind_the_gate_are_not_adopted().await);
    used.extend(adopted_lifecycle::the_api_takes_an_adopted_jobs_acknowledgements_and_loss().await);
    used.extend(
        adopted_lifecycle::an_eviction_a_budget_refuses_backs_off_as_the_api_server_asks().await,
    );
    used.extend(adopted_scaling::a_weight_resizes_an_adopted_pod_relative_to_its_template().await);
    used.extend(
        adopted_scaling::dragon_grows_an_elastic_pytorchjob_and_its_new_workers_go_where_it_decided()
            .await,
    );
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let base = granted(&format!("{deploy}/rbac.yaml"));
    let beyond: Vec<&Access> = used.difference(&base).collect();
    assert!(
        !beyond.is_empty(),
        "adoption evicts, which the base role does not grant"
    );
    let kinds = [
        ("job", "batch", "jobs"),
        ("jobset", "jobset.x-k8s.io", "jobsets"),
        ("pytorchjob", "kubeflow.org", "pytorchjobs"),
    ];
    for (kind, group, owners) in kinds {
        let component = granted(&format!("{deploy}/integrations/{kind}/rbac.yaml"));
        for access in &beyond {
            // What adoption does to another kind's owner (an elastic PyTorchJob's
            // scale) is that kind's component's to grant.
            let another_owner = kinds.iter().any(|&(_, g, o)| {
                (g, o) != (group, owners) && access.group == g && access.resource == o
            });
            assert!(
                another_owner || component.contains(access),
                "the {kind} integration does not grant what adoption uses: {access:?}"
            );
        }
        for access in &component {
            // The owners are read by reflectors (list, watch), which the scripted
            // server does not serve; reading is all a component may do to them.
            let reads_owner = access.group == group
                && access.resource == owners
                && matches!(access.verb.as_str(), "get" | "list" | "watch");
            assert!(
                reads_owner || used.contains(access),
                "the {kind} integration grants what adoption never uses: {access:?}"
            );
        }
    }
}
