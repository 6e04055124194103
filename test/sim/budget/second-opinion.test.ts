import { familyBudget } from '../budget.js';

familyBudget('second-opinion');
