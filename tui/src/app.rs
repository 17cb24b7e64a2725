//! UI state: what is selected, sorted, filtered and shown; key handling.
//! Rendering (in `render/`) only reads it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use analyzer::engine::{DirectionReport, RoceFlowReport};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::keys::{Action, action_for};
use crate::model::{DirKey, DirRate, RoceKey, Snapshot};

/// Sort columns of the connections table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Goodput,
    Retransmissions,
    RttP99,
    Stalls,
}

impl SortKey {
    pub const ALL: [SortKey; 4] = [
        SortKey::Goodput,
        SortKey::Retransmissions,
        SortKey::RttP99,
        SortKey::Stalls,
    ];

    pub const fn label(self) -> &'static str {
        match self {
            SortKey::Goodput => "goodput",
            SortKey::Retransmissions => "retx",
            SortKey::RttP99 => "rtt p99",
            SortKey::Stalls => "stalls",
        }
    }

    fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Main,
    Detail,
}

/// What the main loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Quit,
    Reset,
    Pause(bool),
}

/// One row of the connections table.
#[derive(Debug, Clone, Copy)]
pub struct ConnRow<'a> {
    pub key: DirKey,
    pub dir: &'a DirectionReport,
    pub rate: DirRate,
}

/// One row of the RoCEv2 flows table.
#[derive(Debug, Clone, Copy)]
pub struct RoceRow<'a> {
    pub key: RoceKey,
    pub flow: &'a RoceFlowReport,
    pub rate: DirRate,
}

/// A row of a sortable table: its value in each sort column, and its
/// first frame for ties.
trait TableRow {
    fn metric(&self, key: SortKey) -> f64;
    fn first_frame(&self) -> u64;
}

impl TableRow for ConnRow<'_> {
    fn metric(&self, key: SortKey) -> f64 {
        match key {
            SortKey::Goodput => self.rate.goodput_bps,
            SortKey::Retransmissions => self.dir.retransmissions as f64,
            SortKey::RttP99 => self.dir.ack_rtt_ns.p99 as f64,
            SortKey::Stalls => (self.dir.stalls.len() as u64 + self.dir.stalls_dropped) as f64,
        }
    }

    fn first_frame(&self) -> u64 {
        self.dir.first_frame
    }
}

/// RoCEv2 flows sort by the same columns where they apply (goodput:
/// request payload rate; stalls: NAKs and RNR NAKs).
impl TableRow for RoceRow<'_> {
    fn metric(&self, key: SortKey) -> f64 {
        match key {
            SortKey::Goodput => self.rate.goodput_bps,
            SortKey::Retransmissions => self.flow.retransmissions as f64,
            SortKey::RttP99 => self.flow.ack_rtt_ns.p99 as f64,
            SortKey::Stalls => (self.flow.naks + self.flow.rnr_naks) as f64,
        }
    }

    fn first_frame(&self) -> u64 {
        self.flow.first_frame
    }
}

/// What is selected: a MetaRoCE direction or a RoCEv2 flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelKey {
    Dir(DirKey),
    Roce(RoceKey),
}

/// The selected row, with its data.
#[derive(Debug, Clone, Copy)]
pub enum Selected<'a> {
    Dir(ConnRow<'a>),
    Roce(RoceRow<'a>),
}

impl Selected<'_> {
    pub fn key(&self) -> SelKey {
        match self {
            Selected::Dir(r) => SelKey::Dir(r.key),
            Selected::Roce(r) => SelKey::Roce(r.key),
        }
    }
}

/// Everything the UI remembers between frames.
pub struct App {
    pub snapshot: Arc<Snapshot>,
    pub sort: SortKey,
    pub descending: bool,
    pub filter: String,
    /// Some while the filter is being typed.
    pub filter_input: Option<String>,
    /// Show directions that only sent feedback.
    pub show_all: bool,
    pub paused: bool,
    pub help: bool,
    pub view: View,
    /// The selected row (MetaRoCE rows first, then RoCEv2 flows); the
    /// first row when unset or gone.
    pub selected: Option<SelKey>,
    /// A one-line message for the status bar (e.g. where a snapshot went).
    pub message: Option<String>,
    pub save_dir: PathBuf,
    /// Rows per page of the connections table (set while rendering).
    pub page_rows: usize,
}

impl App {
    pub fn new(snapshot: Arc<Snapshot>, save_dir: PathBuf) -> App {
        App {
            snapshot,
            sort: SortKey::Goodput,
            descending: true,
            filter: String::new(),
            filter_input: None,
            show_all: false,
            paused: false,
            help: false,
            view: View::Main,
            selected: None,
            message: None,
            save_dir,
            page_rows: 10,
        }
    }

    /// Takes a new snapshot unless the view is paused.
    pub fn update(&mut self, snapshot: Arc<Snapshot>) {
        if !self.paused {
            self.snapshot = snapshot;
        }
    }

    fn matches(&self, key: &DirKey) -> bool {
        self.filter_matches(|| {
            format!(
                "{} {:#x} {:#x}",
                key.to_string().to_lowercase(),
                key.src_conn,
                key.dst_conn
            )
        })
    }

    /// A RoCEv2 flow matches by addresses and by QP (hex as shown, or
    /// decimal).
    fn matches_roce(&self, key: &RoceKey) -> bool {
        self.filter_matches(|| {
            format!(
                "{} {:#x} {} rocev2",
                key.to_string().to_lowercase(),
                key.dest_qp,
                key.dest_qp
            )
        })
    }

    fn filter_matches(&self, text: impl FnOnce() -> String) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        let f = self.filter.to_lowercase();
        let text = text();
        f.split_whitespace().all(|w| text.contains(w))
    }

    /// The connections table: filtered, sorted (ties by first frame).
    pub fn rows(&self) -> Vec<ConnRow<'_>> {
        let snap = &self.snapshot;
        let mut rows: Vec<ConnRow<'_>> = snap
            .report
            .directions
            .iter()
            .enumerate()
            .filter(|(_, d)| self.show_all || d.data_packets > 0)
            .map(|(i, d)| ConnRow {
                key: DirKey::of(d),
                dir: d,
                rate: snap.rates.get(i).copied().unwrap_or_default(),
            })
            .filter(|r| self.matches(&r.key))
            .collect();
        self.sort_rows(&mut rows);
        rows
    }

    /// The RoCEv2 flows table: filtered, sorted by the same column as the
    /// connections table where it applies (`TableRow`).
    pub fn roce_rows(&self) -> Vec<RoceRow<'_>> {
        let snap = &self.snapshot;
        let mut rows: Vec<RoceRow<'_>> = snap
            .report
            .rocev2
            .iter()
            .enumerate()
            .map(|(i, f)| RoceRow {
                key: RoceKey::of(f),
                flow: f,
                rate: snap.rocev2_rates.get(i).copied().unwrap_or_default(),
            })
            .filter(|r| self.matches_roce(&r.key))
            .collect();
        self.sort_rows(&mut rows);
        rows
    }

    /// Sorts a table by the chosen column, in the chosen direction; ties
    /// by first frame, oldest first, in both directions.
    fn sort_rows<R: TableRow>(&self, rows: &mut [R]) {
        rows.sort_by(|a, b| {
            let o = a.metric(self.sort).total_cmp(&b.metric(self.sort));
            let o = if self.descending { o.reverse() } else { o };
            o.then(a.first_frame().cmp(&b.first_frame()))
        });
    }

    /// Every selectable row in table order: MetaRoCE rows, then RoCEv2.
    fn all_rows(&self) -> Vec<Selected<'_>> {
        let mut all: Vec<Selected<'_>> = self.rows().into_iter().map(Selected::Dir).collect();
        all.extend(self.roce_rows().into_iter().map(Selected::Roce));
        all
    }

    fn index_of(&self, all: &[Selected<'_>]) -> Option<usize> {
        if all.is_empty() {
            return None;
        }
        Some(
            self.selected
                .and_then(|k| all.iter().position(|r| r.key() == k))
                .unwrap_or(0),
        )
    }

    /// The selected row: MetaRoCE direction or RoCEv2 flow (the first row
    /// when the selection is gone).
    pub fn selection(&self) -> Option<Selected<'_>> {
        let all = self.all_rows();
        self.index_of(&all).map(|i| all[i])
    }

    /// Index of the selected row in `rows` (the MetaRoCE table), if the
    /// selection is there.
    pub fn selected_index(&self, rows: &[ConnRow<'_>]) -> Option<usize> {
        match self.selection()? {
            Selected::Dir(r) => rows.iter().position(|x| x.key == r.key),
            Selected::Roce(_) => None,
        }
    }

    /// Index of the selected row in `rows` (the RoCEv2 table), if the
    /// selection is there.
    pub fn selected_roce_index(&self, rows: &[RoceRow<'_>]) -> Option<usize> {
        match self.selection()? {
            Selected::Roce(r) => rows.iter().position(|x| x.key == r.key),
            Selected::Dir(_) => None,
        }
    }

    /// The selected connection direction, when a MetaRoCE row is selected.
    pub fn selected_row(&self) -> Option<ConnRow<'_>> {
        match self.selection()? {
            Selected::Dir(r) => Some(r),
            Selected::Roce(_) => None,
        }
    }

    fn move_by(&mut self, delta: isize) {
        let all = self.all_rows();
        let Some(i) = self.index_of(&all) else {
            return;
        };
        let n = all.len() as isize;
        let j = (i as isize + delta).clamp(0, n - 1) as usize;
        self.selected = Some(all[j].key());
    }

    /// A key press.
    pub fn on_key(&mut self, key: &KeyEvent) -> Option<Effect> {
        if let Some(input) = &mut self.filter_input {
            // Ctrl-C quits from the filter prompt too; other Ctrl or Alt
            // chords are not text (both together is AltGr: text).
            let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
            if ctrl && key.code == KeyCode::Char('c') {
                return Some(Effect::Quit);
            }
            if ctrl != key.modifiers.contains(KeyModifiers::ALT) {
                return None;
            }
            match key.code {
                KeyCode::Enter => {
                    self.filter = input.trim().to_string();
                    self.filter_input = None;
                }
                KeyCode::Esc => self.filter_input = None,
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return None;
        }
        action_for(key).and_then(|a| self.act(a))
    }

    /// Performs an action.
    pub fn act(&mut self, action: Action) -> Option<Effect> {
        self.message = None;
        match action {
            Action::Quit => return Some(Effect::Quit),
            Action::Help => self.help = !self.help,
            Action::Up => self.move_by(-1),
            Action::Down => self.move_by(1),
            Action::PageUp => self.move_by(-(self.page_rows.max(1) as isize)),
            Action::PageDown => self.move_by(self.page_rows.max(1) as isize),
            Action::Top => self.move_by(isize::MIN / 2),
            Action::Bottom => self.move_by(isize::MAX / 2),
            Action::Detail => {
                if let Some(r) = self.selection() {
                    self.selected = Some(r.key());
                    self.view = View::Detail;
                }
            }
            Action::Back => {
                if self.help {
                    self.help = false;
                } else if self.view == View::Detail {
                    self.view = View::Main;
                } else {
                    self.filter.clear();
                }
            }
            Action::NextSort => self.sort = self.sort.next(),
            Action::ReverseSort => self.descending = !self.descending,
            Action::SortGoodput => self.sort = SortKey::Goodput,
            Action::SortRetx => self.sort = SortKey::Retransmissions,
            Action::SortRtt => self.sort = SortKey::RttP99,
            Action::SortStalls => self.sort = SortKey::Stalls,
            Action::Filter => self.filter_input = Some(self.filter.clone()),
            Action::ShowAll => self.show_all = !self.show_all,
            Action::Pause => {
                self.paused = !self.paused;
                return Some(Effect::Pause(self.paused));
            }
            Action::Reset => {
                self.message = Some("analysis reset".into());
                return Some(Effect::Reset);
            }
            Action::Save => {
                self.message = Some(match save_snapshot(&self.snapshot, &self.save_dir) {
                    Ok(path) => format!("saved {}", path.display()),
                    Err(e) => format!("save failed: {e}"),
                });
            }
        }
        None
    }
}

/// Writes `snap` as pretty JSON to `dir/metaroce-top-<epoch s>-<seq>.json`.
pub fn save_snapshot(snap: &Snapshot, dir: &Path) -> anyhow::Result<PathBuf> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let path = dir.join(format!("metaroce-top-{secs}-{}.json", snap.seq));
    write_json(snap, &path)?;
    Ok(path)
}

/// Writes `snap` as pretty JSON to `path`.
pub fn write_json(snap: &Snapshot, path: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_vec_pretty(snap)?;
    std::fs::write(path, json)?;
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::model::SourceInfo;

    fn app() -> App {
        let snap = Snapshot::empty(SourceInfo::Replay {
            file: "x.pcap".into(),
            speed: 1.0,
        });
        App::new(Arc::new(snap), PathBuf::from("."))
    }

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn filter_prompt_takes_text_and_ctrl_c_still_quits() {
        let mut a = app();
        assert_eq!(a.on_key(&key(KeyCode::Char('/'), KeyModifiers::NONE)), None);
        for c in "10.0 q".chars() {
            assert_eq!(a.on_key(&key(KeyCode::Char(c), KeyModifiers::NONE)), None);
        }
        // Not text: a control chord.
        a.on_key(&key(KeyCode::Char('u'), KeyModifiers::CONTROL));
        a.on_key(&key(KeyCode::Backspace, KeyModifiers::NONE));
        a.on_key(&key(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(a.filter, "10.0");
        a.on_key(&key(KeyCode::Char('f'), KeyModifiers::NONE));
        assert_eq!(
            a.on_key(&key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Effect::Quit)
        );
    }

    #[test]
    fn keys_on_an_empty_snapshot_do_not_panic() {
        let mut a = app();
        for action in [
            Action::Up,
            Action::Down,
            Action::PageDown,
            Action::Bottom,
            Action::Top,
            Action::Detail,
            Action::Back,
            Action::NextSort,
            Action::ReverseSort,
            Action::ShowAll,
        ] {
            a.act(action);
        }
        assert_eq!(a.view, View::Main, "no detail without a row");
        assert!(a.selection().is_none());
        assert_eq!(a.act(Action::Pause), Some(Effect::Pause(true)));
        assert_eq!(a.act(Action::Reset), Some(Effect::Reset));
        assert_eq!(a.act(Action::Quit), Some(Effect::Quit));
    }
}
