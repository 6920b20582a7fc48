//! Reading training progress out of log lines: a job's `progress.log.pattern` (or the
//! training library's line, [`DEFAULT_LOG_PATTERN`]) compiled once, then applied line
//! by line to give `(step, value)` samples, and the library's
//! `switchyard: checkpoint-complete` line ([`CheckpointComplete`]). It owns the meaning
//! of the pattern's groups; it must not know where the lines come from (the log follower
//! in [`super::observe`] feeds it).

use regex::Regex;

use crate::Error;

/// The pattern of a job whose `progress.log.pattern` is omitted: the line the
/// switchyard training library prints for each report, `switchyard: step=12 loss=0.25`.
pub const DEFAULT_LOG_PATTERN: &str = r"^switchyard: step=(?P<step>\d+) loss=(?P<value>\S+)\s*$";

/// What starts the line a training process prints once its checkpoint is completely
/// written: `switchyard: checkpoint-complete step=<step or -> path=<path>`.
const CHECKPOINT_COMPLETE: &str = "switchyard: checkpoint-complete step=";

/// A `switchyard: checkpoint-complete` line, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointComplete {
    /// The training step the checkpoint holds (`-`: not said).
    pub step: Option<u64>,
    /// Where it is: the rest of the line.
    pub path: String,
}

impl CheckpointComplete {
    /// The acknowledgement `line` makes, if it is one: the step a number or `-`, the
    /// path the rest of the line after ` path=` (spaces included, trailing ones and a
    /// carriage return dropped), at most 4096 bytes.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(CHECKPOINT_COMPLETE)?;
        let (step, path) = rest.split_once(" path=")?;
        let step = match step {
            "-" => None,
            digits => Some(digits.parse().ok()?),
        };
        let path = path.trim_end();
        if path.is_empty() || path.len() > switchyard_control::CHECKPOINT_PATH_MAX_BYTES {
            return None;
        }
        Some(Self {
            step,
            path: path.to_string(),
        })
    }
}

/// A compiled `progress.log.pattern`.
#[derive(Clone, Debug)]
pub struct LogPattern {
    regex: Regex,
    value_group: usize,
    step_group: Option<usize>,
    /// Steps given to lines without a step group: one per matching line.
    lines_seen: u64,
}

/// One parsed evaluation: the training step and the value read at it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParsedSample {
    /// Training step (the `step` group, or the count of matching lines so far).
    pub step: u64,
    /// The evaluation value.
    pub value: f64,
}

impl LogPattern {
    /// Compiles `pattern` for `job`. The value is the group named `value`, else group 1;
    /// the step is the group named `step`, if any.
    pub fn compile(job: &str, pattern: &str) -> Result<Self, Error> {
        let regex = Regex::new(pattern).map_err(|source| Error::BadPattern {
            job: job.to_string(),
            pattern: pattern.to_string(),
            source,
        })?;
        let named = |name: &str| regex.capture_names().position(|n| n == Some(name));
        let value_group = match named("value") {
            Some(index) => index,
            None if regex.captures_len() > 1 => 1,
            None => {
                return Err(Error::PatternWithoutValue {
                    job: job.to_string(),
                    pattern: pattern.to_string(),
                });
            }
        };
        Ok(Self {
            step_group: named("step"),
            value_group,
            regex,
            lines_seen: 0,
        })
    }

    /// The sample in `line`, if the line matches and its value is a finite number.
    pub fn parse_line(&mut self, line: &str) -> Option<ParsedSample> {
        let captures = self.regex.captures(line)?;
        let value: f64 = captures.get(self.value_group)?.as_str().parse().ok()?;
        if !value.is_finite() {
            return None;
        }
        self.lines_seen += 1;
        let step = match self.step_group {
            Some(group) => captures.get(group)?.as_str().parse().ok()?,
            None => self.lines_seen,
        };
        Some(ParsedSample { step, value })
    }

    /// Whether the pattern has a `step` group; without one, [`ParsedSample::step`]
    /// counts matching lines, which only means something within one reading of a log.
    pub fn has_step_group(&self) -> bool {
        self.step_group.is_some()
    }

    /// Every sample in `text`, line by line.
    pub fn parse_text(&mut self, text: &str) -> Vec<ParsedSample> {
        text.lines().filter_map(|l| self.parse_line(l)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTORCH_IMAGENET: &str = "\
=> creating model 'resnet50'
Epoch: [3][ 1200/5005]\tTime  0.412 ( 0.431)\tData  0.002 ( 0.013)\tLoss 2.3456e+00 (2.4511e+00)\tAcc@1  46.88 ( 44.12)
Epoch [3/90] Step [1200/5005] loss: 2.3456
Epoch [3/90] Step [1300/5005] loss: 2.3012
Test: [ 0/196]\tTime  1.203 ( 1.203)\tLoss 1.9021e+00 (1.9021e+00)
Epoch [3/90] Step [1400/5005] loss: 2.2871
";

    const LIGHTNING: &str = "\
GPU available: True (cuda), used: True
Epoch 2:  24%|██▍       | 1200/5005 [02:31<07:58,  7.95it/s, v_num=0, train_loss=2.350]
Epoch 2:  26%|██▌       | 1300/5005 [02:43<07:46,  7.95it/s, v_num=0, train_loss=2.290]
Epoch 2:  28%|██▊       | 1400/5005 [02:56<07:33,  7.95it/s, v_num=0, train_loss=nan]
";

    const KERAS: &str = "\
Epoch 4/90
1200/5005 [=====>........................] - ETA: 10:02 - loss: 2.3456 - accuracy: 0.4101
1300/5005 [======>.......................] - ETA: 9:49 - loss: 2.3102 - accuracy: 0.4187
5005/5005 [==============================] - 1021s 204ms/step - loss: 2.1033 - accuracy: 0.4420 - val_loss: 2.0113 - val_accuracy: 0.4610
";

    #[test]
    fn the_default_pattern_reads_the_training_library_s_report_line_and_nothing_else() {
        let mut p = LogPattern::compile("a", DEFAULT_LOG_PATTERN).unwrap();
        let text = "switchyard: step=12 loss=0.25\n\
                    switchyard: step=13 loss=1e-05\r\n\
                    switchyard: step=14 loss=nan\n\
                    switchyard: checkpoint-complete step=14 path=/ckpt/14\n\
                    epoch 3 switchyard: step=15 loss=0.2\n";
        let got: Vec<(u64, f64)> = p
            .parse_text(text)
            .iter()
            .map(|s| (s.step, s.value))
            .collect();
        assert_eq!(got, vec![(12, 0.25), (13, 1e-05)]);
    }

    #[test]
    fn a_checkpoint_complete_line_gives_its_step_and_the_rest_of_the_line_as_its_path() {
        let line = "switchyard: checkpoint-complete step=40 path=/ckpt/run 1/epoch=3.pt\r";
        assert_eq!(
            CheckpointComplete::parse(line),
            Some(CheckpointComplete {
                step: Some(40),
                path: "/ckpt/run 1/epoch=3.pt".into()
            })
        );
        let unsaid =
            CheckpointComplete::parse("switchyard: checkpoint-complete step=- path=s3://b/k");
        assert_eq!(unsaid.map(|c| c.step), Some(None));
        for not_one in [
            "switchyard: checkpoint-complete step=x path=/c",
            "switchyard: checkpoint-complete step=4 path=",
            "switchyard: checkpoint-complete step=4",
            "  switchyard: checkpoint-complete step=4 path=/c",
            "switchyard: step=4 loss=0.1",
        ] {
            assert_eq!(CheckpointComplete::parse(not_one), None, "{not_one}");
        }
        let long = format!(
            "switchyard: checkpoint-complete step=1 path=/{}",
            "x".repeat(5000)
        );
        assert_eq!(CheckpointComplete::parse(&long), None);
    }

    #[test]
    fn pytorch_step_lines_give_step_and_loss_and_other_lines_are_skipped() {
        let mut p = LogPattern::compile(
            "resnet",
            r"Step \[(?P<step>\d+)/\d+\] loss: (?P<value>[0-9.eE+-]+)",
        )
        .unwrap();
        let samples = p.parse_text(PYTORCH_IMAGENET);
        assert_eq!(
            samples,
            vec![
                ParsedSample {
                    step: 1200,
                    value: 2.3456
                },
                ParsedSample {
                    step: 1300,
                    value: 2.3012
                },
                ParsedSample {
                    step: 1400,
                    value: 2.2871
                },
            ]
        );
    }

    #[test]
    fn pytorch_meter_lines_read_the_current_loss_in_scientific_notation() {
        let mut p = LogPattern::compile(
            "resnet",
            r"Epoch: \[\d+\]\[\s*(?P<step>\d+)/\d+\].*\tLoss (?P<value>[0-9.eE+-]+) ",
        )
        .unwrap();
        assert_eq!(
            p.parse_text(PYTORCH_IMAGENET),
            vec![ParsedSample {
                step: 1200,
                value: 2.3456
            }]
        );
    }

    #[test]
    fn lightning_progress_bars_skip_a_nan_loss() {
        let mut p = LogPattern::compile(
            "bert",
            r"\| (?P<step>\d+)/\d+ \[.*train_loss=(?P<value>[0-9.eE+-]+|nan)",
        )
        .unwrap();
        let samples = p.parse_text(LIGHTNING);
        assert_eq!(
            samples,
            vec![
                ParsedSample {
                    step: 1200,
                    value: 2.35
                },
                ParsedSample {
                    step: 1300,
                    value: 2.29
                },
            ]
        );
    }

    #[test]
    fn keras_lines_give_the_training_loss_not_the_validation_loss() {
        let mut p = LogPattern::compile(
            "vgg",
            r"^\s*(?P<step>\d+)/\d+ \[.*?- loss: (?P<value>[0-9.eE+-]+)",
        )
        .unwrap();
        let samples = p.parse_text(KERAS);
        assert_eq!(
            samples,
            vec![
                ParsedSample {
                    step: 1200,
                    value: 2.3456
                },
                ParsedSample {
                    step: 1300,
                    value: 2.3102
                },
                ParsedSample {
                    step: 5005,
                    value: 2.1033
                },
            ]
        );
    }

    #[test]
    fn a_rising_metric_can_be_read_from_the_first_group_without_names() {
        let mut p = LogPattern::compile("vgg", r" - accuracy: ([0-9.]+)").unwrap();
        let samples = p.parse_text(KERAS);
        let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
        assert_eq!(values, vec![0.4101, 0.4187, 0.4420]);
        let steps: Vec<u64> = samples.iter().map(|s| s.step).collect();
        assert_eq!(
            steps,
            vec![1, 2, 3],
            "without a step group, matching lines count"
        );
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_refused_naming_the_job_and_pattern() {
        let error = LogPattern::compile("resnet", r"loss=([0-9.+").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("resnet"), "{message}");
        assert!(message.contains("loss=([0-9.+"), "{message}");
        assert_eq!(error.metric_label(), "bad_pattern");
    }

    #[test]
    fn a_pattern_without_a_group_is_refused_because_it_cannot_name_a_value() {
        let error = LogPattern::compile("resnet", r"loss=[0-9.]+").unwrap_err();
        assert!(error.to_string().contains("capture group"), "{error}");
    }
}
