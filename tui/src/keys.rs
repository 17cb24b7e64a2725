//! Key bindings as data: one table maps keys to actions and feeds both
//! the dispatcher and the help overlay.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Everything a key can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Help,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Detail,
    Back,
    NextSort,
    ReverseSort,
    SortGoodput,
    SortRetx,
    SortRtt,
    SortStalls,
    Filter,
    ShowAll,
    Pause,
    Reset,
    Save,
}

/// One key: its code and the modifiers that must be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

const fn k(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        mods: KeyModifiers::NONE,
    }
}

const fn code(code: KeyCode) -> Key {
    Key {
        code,
        mods: KeyModifiers::NONE,
    }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        mods: KeyModifiers::CONTROL,
    }
}

/// One row of the binding table.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub action: Action,
    pub keys: &'static [Key],
    /// How the help overlay names the keys.
    pub label: &'static str,
    pub help: &'static str,
}

/// The key bindings.
#[rustfmt::skip]
pub const BINDINGS: &[Binding] = &[
    Binding { action: Action::Quit, keys: &[k('q'), ctrl('c')], label: "q, Ctrl-C", help: "quit" },
    Binding { action: Action::Help, keys: &[k('?'), k('h'), code(KeyCode::F(1))], label: "?, h, F1", help: "toggle this help" },
    Binding { action: Action::Up, keys: &[code(KeyCode::Up), k('k')], label: "↑, k", help: "select previous connection" },
    Binding { action: Action::Down, keys: &[code(KeyCode::Down), k('j')], label: "↓, j", help: "select next connection" },
    Binding { action: Action::PageUp, keys: &[code(KeyCode::PageUp)], label: "PgUp", help: "up one page" },
    Binding { action: Action::PageDown, keys: &[code(KeyCode::PageDown)], label: "PgDn", help: "down one page" },
    Binding { action: Action::Top, keys: &[code(KeyCode::Home), k('g')], label: "Home, g", help: "first connection" },
    Binding { action: Action::Bottom, keys: &[code(KeyCode::End), k('G')], label: "End, G", help: "last connection" },
    Binding { action: Action::Detail, keys: &[code(KeyCode::Enter), k('l'), code(KeyCode::Right)], label: "Enter, l", help: "detail view of the selected connection" },
    Binding { action: Action::Back, keys: &[code(KeyCode::Esc), code(KeyCode::Left)], label: "Esc", help: "back: close help / detail, clear the filter" },
    Binding { action: Action::NextSort, keys: &[k('s')], label: "s", help: "next sort column" },
    Binding { action: Action::ReverseSort, keys: &[k('S')], label: "S", help: "reverse the sort order" },
    Binding { action: Action::SortGoodput, keys: &[k('1')], label: "1", help: "sort by goodput" },
    Binding { action: Action::SortRetx, keys: &[k('2')], label: "2", help: "sort by retransmissions" },
    Binding { action: Action::SortRtt, keys: &[k('3')], label: "3", help: "sort by RTT p99" },
    Binding { action: Action::SortStalls, keys: &[k('4')], label: "4", help: "sort by stalls" },
    Binding { action: Action::Filter, keys: &[k('/'), k('f')], label: "/, f", help: "filter connections (address or conn id; Enter applies)" },
    Binding { action: Action::ShowAll, keys: &[k('a')], label: "a", help: "also show feedback-only directions" },
    Binding { action: Action::Pause, keys: &[k('p'), k(' ')], label: "p, Space", help: "pause the view (and a replay)" },
    Binding { action: Action::Reset, keys: &[k('r')], label: "r", help: "reset the analysis (capture counters stay)" },
    Binding { action: Action::Save, keys: &[k('w')], label: "w", help: "save a JSON snapshot" },
];

/// The action bound to `event`, if any. Shift is ignored for characters
/// (it is part of the character: `S`, `G`, `?`).
pub fn action_for(event: &KeyEvent) -> Option<Action> {
    let mods = match event.code {
        KeyCode::Char(_) => event.modifiers - KeyModifiers::SHIFT,
        _ => event.modifiers,
    };
    BINDINGS
        .iter()
        .find(|b| {
            b.keys
                .iter()
                .any(|key| key.code == event.code && key.mods == mods)
        })
        .map(|b| b.action)
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn every_key_maps_to_one_action() {
        let mut seen = Vec::new();
        for b in BINDINGS {
            for key in b.keys {
                assert!(!seen.contains(key), "{key:?} bound twice");
                seen.push(*key);
            }
        }
        let ev = |c, m| KeyEvent::new(c, m);
        assert_eq!(
            action_for(&ev(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            action_for(&ev(KeyCode::Char('S'), KeyModifiers::SHIFT)),
            Some(Action::ReverseSort)
        );
        assert_eq!(
            action_for(&ev(KeyCode::Char('c'), KeyModifiers::NONE)),
            None
        );
    }
}
