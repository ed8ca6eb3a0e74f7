//! Hand-built plans.

use rlprof_profiler::plan::{
    Caps, Content, ExportType, Granularity, Layout, Level, NsysOptions, ProfilePlan, Role,
    RolePlan, Schedule, ScheduleScope, Tool, TorchMemoryOptions,
};
use std::collections::BTreeMap;
use std::path::Path;

/// Builds a [`ProfilePlan`] for tests without a config document. Every role of the plan gets
/// the same [`RolePlan`].
///
/// The defaults: tool npu, level0, contents `[npu, cpu]`, rank 0 of a world of 1 (not
/// `all_ranks`), continuous mode, default caps, no schedule, step `[1]` in its own collection,
/// roles actor, rollout and ref, tool source `"test"`, verl's layout.
///
/// ```
/// use rlprof_testkit::PlanBuilder;
/// let plan = PlanBuilder::new("/tmp/save").ranks([0, 1]).world(2).steps(&[1, 2]).build();
/// assert_eq!(plan.step_groups, vec![vec![1], vec![2]]);
/// assert!(plan.roles.values().all(|r| r.ranks == vec![0, 1]));
/// ```
#[derive(Debug, Clone)]
pub struct PlanBuilder {
    role: RolePlan,
    roles: Vec<Role>,
    steps: Vec<u64>,
    continuous: bool,
    world: u32,
    tool_source: String,
    layout: Layout,
}

impl PlanBuilder {
    /// The default plan (see [`PlanBuilder`]) saving under `save`.
    pub fn new(save: impl AsRef<Path>) -> PlanBuilder {
        let save = save.as_ref().to_path_buf();
        PlanBuilder {
            role: RolePlan {
                enable: true,
                all_ranks: false,
                ranks: vec![0],
                tool: Tool::Npu,
                level: Level::Level0,
                export_type: ExportType::default(),
                contents: [Content::Npu, Content::Cpu].into_iter().collect(),
                analysis: false,
                discrete: false,
                save_path: save,
                torch_step_start: 0,
                torch_step_end: -1,
                torch_memory: TorchMemoryOptions::default(),
                caps: Caps::default(),
                schedule: None,
                granularity: Granularity::default(),
                schedule_scope: ScheduleScope::default(),
            },
            roles: vec![Role::Actor, Role::Rollout, Role::Ref],
            steps: vec![1],
            continuous: false,
            world: 1,
            tool_source: "test".into(),
            layout: Layout::default(),
        }
    }

    /// Where collections go (default: verl's layout).
    pub fn layout(mut self, layout: Layout) -> PlanBuilder {
        self.layout = layout;
        self
    }

    /// The ranks that collect.
    pub fn ranks(mut self, ranks: impl IntoIterator<Item = u32>) -> PlanBuilder {
        self.role.ranks = ranks.into_iter().collect();
        self
    }

    /// `profiler.all_ranks` (the ranks stay as given: set them with [`PlanBuilder::ranks`]).
    pub fn all_ranks(mut self, all: bool) -> PlanBuilder {
        self.role.all_ranks = all;
        self
    }

    /// The tool of the roles and of the plan.
    pub fn tool(mut self, tool: Tool) -> PlanBuilder {
        self.role.tool = tool;
        self
    }

    /// `tool_config.npu.level`.
    pub fn level(mut self, level: Level) -> PlanBuilder {
        self.role.level = level;
        self
    }

    /// `tool_config.npu.export_type`.
    pub fn export_type(mut self, export_type: ExportType) -> PlanBuilder {
        self.role.export_type = export_type;
        self
    }

    /// The resolved contents.
    pub fn contents(mut self, contents: &[Content]) -> PlanBuilder {
        self.role.contents = contents.iter().copied().collect();
        self
    }

    /// Discrete mode (one collection per role call).
    pub fn discrete(mut self, discrete: bool) -> PlanBuilder {
        self.role.discrete = discrete;
        self
    }

    /// The size caps of each collection.
    pub fn caps(mut self, caps: Caps) -> PlanBuilder {
        self.role.caps = caps;
        self
    }

    /// No size caps at all (benchmarks that record many events).
    pub fn uncapped(self) -> PlanBuilder {
        self.caps(Caps {
            max_events: None,
            max_bytes: None,
        })
    }

    /// The inner-iteration schedule and what it counts in `update_actor`.
    pub fn schedule(mut self, schedule: Option<Schedule>, granularity: Granularity) -> PlanBuilder {
        self.role.schedule = schedule;
        self.role.granularity = granularity;
        self
    }

    /// Any other change to the roles' plan.
    pub fn role(mut self, change: impl FnOnce(&mut RolePlan)) -> PlanBuilder {
        change(&mut self.role);
        self
    }

    /// Replaces the roles' plan with `role`.
    pub fn with_role(mut self, role: RolePlan) -> PlanBuilder {
        self.role = role;
        self
    }

    /// The roles present in the job.
    pub fn roles(mut self, roles: &[Role]) -> PlanBuilder {
        self.roles = roles.to_vec();
        self
    }

    /// The profiled steps (sorted, 1-based).
    pub fn steps(mut self, steps: &[u64]) -> PlanBuilder {
        self.steps = steps.to_vec();
        self
    }

    /// `profile_continuous_steps`: consecutive steps share one collection.
    pub fn continuous(mut self, continuous: bool) -> PlanBuilder {
        self.continuous = continuous;
        self
    }

    /// The world size.
    pub fn world(mut self, world: u32) -> PlanBuilder {
        self.world = world;
        self
    }

    /// Why the tool was chosen (shown in plan descriptions).
    pub fn tool_source(mut self, source: &str) -> PlanBuilder {
        self.tool_source = source.into();
        self
    }

    /// The plan of each role.
    pub fn role_plan(&self) -> RolePlan {
        self.role.clone()
    }

    /// The plan.
    pub fn build(&self) -> ProfilePlan {
        let step_groups = if self.continuous {
            let mut groups: Vec<Vec<u64>> = vec![];
            for &s in &self.steps {
                match groups.last_mut() {
                    Some(g) if g.last().is_some_and(|&l| l + 1 == s) => g.push(s),
                    _ => groups.push(vec![s]),
                }
            }
            groups
        } else {
            self.steps.iter().map(|&s| vec![s]).collect()
        };
        let roles: BTreeMap<Role, RolePlan> =
            self.roles.iter().map(|&r| (r, self.role.clone())).collect();
        ProfilePlan {
            tool: Some(self.role.tool),
            tool_source: self.tool_source.clone(),
            steps: self.steps.clone(),
            profile_continuous_steps: self.continuous,
            save_path: self.role.save_path.clone(),
            world_size: self.world,
            step_groups,
            layout: self.layout,
            roles,
            nsys: NsysOptions::default(),
            torch_memory: TorchMemoryOptions::default(),
            warnings: vec![],
            verl: Default::default(),
        }
    }
}
